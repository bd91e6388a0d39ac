package tokenizer

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/minfer/minfer/internal/testpath"
)

// mixedText builds ~1 MB of prose, code and non-Latin text: the held-out prose and code
// of shared/testdata/models/trained and testdata/nonlatin.txt, interleaved by paragraph
// and repeated.
func mixedText(tb testing.TB, size int) string {
	tb.Helper()
	var parts [][]string
	for _, p := range []string{
		testpath.Path(tb, "models", "trained", "eval-prose.txt"),
		testpath.Path(tb, "models", "trained", "eval-code.txt"),
		"testdata/nonlatin.txt",
	} {
		b, err := os.ReadFile(p)
		if err != nil {
			tb.Fatal(err)
		}
		parts = append(parts, strings.SplitAfter(string(b), "\n\n"))
	}
	var sb strings.Builder
	for i := 0; sb.Len() < size; i++ {
		for _, p := range parts {
			sb.WriteString(p[i%len(p)])
		}
	}
	return sb.String()[:size]
}

// BenchmarkEncodeQwen3 is the throughput figure recorded in docs/perf-tokenizer.md:
// go test -run XXX -bench EncodeQwen3 -cpu 1 ./core/tokenizer/
func BenchmarkEncodeQwen3(b *testing.B) {
	tok := loadHF(b, "qwen3")
	text := mixedText(b, 1<<20)
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := tok.Encode(text, false, false); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeQwen3NoCache is the same without the per-call word cache: the speed of
// text whose words never repeat.
func BenchmarkEncodeQwen3NoCache(b *testing.B) {
	tok := loadHF(b, "qwen3")
	text := mixedText(b, 1<<20)
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := tok.encode(context.Background(), text, false, false, false); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeLlama3(b *testing.B) {
	tok := loadHF(b, "llama3")
	text := mixedText(b, 1<<20)
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := tok.Encode(text, false, false); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeQwen3(b *testing.B) {
	tok := loadHF(b, "qwen3")
	text := mixedText(b, 1<<20)
	ids, _ := tok.Encode(text, false, false)
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := tok.Decode(ids); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFromHFQwen3(b *testing.B) {
	p := testpath.Path(b, "tokenizer", "hf", "qwen3", "tokenizer.json")
	for i := 0; i < b.N; i++ {
		if _, err := FromHF(p); err != nil {
			b.Fatal(err)
		}
	}
}
