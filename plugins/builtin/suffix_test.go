package builtin

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/minfer/minfer/sdk"
)

func suffixDraft(t *testing.T, params string, seq []int32, maxDepth int) sdk.DraftResult {
	t.Helper()
	s, err := NewSuffix([]byte(params))
	if err != nil {
		t.Fatal(err)
	}
	h := len(seq) / 3 // told in two chunks, as rounds tell it
	s.Draft(context.Background(), &sdk.DraftRequest{Appended: seq[:h], MaxDepth: 1, Vocab: 64})
	res, err := s.Draft(context.Background(), &sdk.DraftRequest{Appended: seq[h:], MaxDepth: maxDepth, Vocab: 64})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestSuffix(t *testing.T) {
	for _, tc := range []struct {
		name     string
		params   string
		seq      []int32
		maxDepth int
		want     []int32
		conf     []float32
	}{
		{"nothing earlier", `{}`, []int32{1, 2, 3, 4, 5}, 8, nil, nil},
		// one earlier occurrence of 1 2 3: the copy, as long as the match allows
		{"copy", `{}`, []int32{1, 2, 3, 4, 5, 6, 9, 1, 2, 3}, 8, []int32{4, 5, 6}, []float32{1, 1, 1}},
		{"depth bound", `{}`, []int32{1, 2, 3, 4, 5, 6, 9, 1, 2, 3}, 2, []int32{4, 5}, []float32{1, 1}},
		// 7 went on to 8 twice and to 9 once: the most supported continuation, at 2/3
		{"most support", `{}`, []int32{7, 8, 1, 7, 9, 2, 7, 8, 1, 3, 7}, 8, []int32{8}, []float32{2.0 / 3}},
		// the longer match (5 7) leads to 9 only, with certainty
		{"longer match", `{}`, []int32{7, 8, 1, 5, 7, 9, 4, 7, 8, 2, 5, 7}, 8, []int32{9, 4}, []float32{1, 1}},
		{"min_prob cuts", `{"min_prob":0.7}`, []int32{7, 8, 1, 7, 9, 2, 7, 8, 1, 3, 7}, 8, nil, nil},
		{"factor and offset", `{"factor":0,"offset":1}`, []int32{1, 2, 3, 4, 5, 6, 9, 1, 2, 3}, 8, []int32{4}, []float32{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := suffixDraft(t, tc.params, tc.seq, tc.maxDepth)
			if !slices.Equal(res.Tokens, tc.want) || !slices.Equal(res.Conf, tc.conf) {
				t.Fatalf("got %v %v, want %v %v", res.Tokens, res.Conf, tc.want, tc.conf)
			}
		})
	}
}

// TestSuffixDepthLimit: the trie holds substrings of at most depth tokens, so after a
// match of m tokens a long copy is proposed only depth - m tokens far (the best of the
// matches here is m = 1, with depth - 1 tokens).
func TestSuffixDepthLimit(t *testing.T) {
	var seq []int32
	for i := range 40 {
		seq = append(seq, int32(i))
	}
	seq = append(seq, 60, 0, 1, 2, 3)
	res := suffixDraft(t, `{"depth":6,"max_pattern":4,"factor":8}`, seq, 16)
	if want := []int32{4, 5, 6, 7, 8}; !slices.Equal(res.Tokens, want) {
		t.Fatalf("got %v, want %v (depth 6 - match 1)", res.Tokens, want)
	}
}

func TestSuffixParams(t *testing.T) {
	for params, want := range map[string]string{
		`{"depth":1}`:                 "depth = 1",
		`{"depth":8,"max_pattern":8}`: "max_pattern = 8",
		`{"min_prob":2}`:              "min_prob",
		`{"offset":-1}`:               "offset = -1",
		`{"window":3}`:                `unknown field "window"`,
	} {
		if _, err := NewSuffix([]byte(params)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error containing %q", params, err, want)
		}
	}
}

// TestSuffixMatchesTrie: the suffix automaton proposes exactly what the suffix trie of
// the same depth proposed (suffix_ref_test.go), token for token and confidence for
// confidence, over random sequences rich in repeats and copies, told in random chunks
// with random depth bounds and params; and past max_tokens exactly what a trie started
// afresh over the newest half proposes.
func TestSuffixMatchesTrie(t *testing.T) {
	r := rand.New(rand.NewPCG(22, 1))
	for trial := range 300 {
		depth := 2 + r.IntN(40)
		maxTokens := 1 << 17
		if trial%3 == 0 {
			maxTokens = 64 + r.IntN(100)
		}
		refParams := fmt.Sprintf(`{"depth":%d,"max_pattern":%d,"min_prob":%g,"factor":%g,"offset":%d}`,
			depth, 1+r.IntN(depth-1), []float64{0, 0.1, 0.5}[r.IntN(3)], []float64{0, 1, 2.5}[r.IntN(3)], r.IntN(4))
		params := fmt.Sprintf(`%s,"max_tokens":%d}`, strings.TrimSuffix(refParams, "}"), maxTokens)
		s, err := NewSuffix([]byte(params))
		if err != nil {
			t.Fatal(err)
		}
		ref, err := newSuffixTrie([]byte(refParams))
		if err != nil {
			t.Fatal(err)
		}
		seq := randomCopySeq(r, 50+r.IntN(400), 2+r.IntN(8))
		for at := 0; at < len(seq); {
			n := 1 + r.IntN(12)
			if at == 0 {
				n = 1 + r.IntN(len(seq)/2)
			}
			chunk := seq[at:min(at+n, len(seq))]
			at += len(chunk)
			for _, tok := range chunk { // the reference restarts as the automaton does
				if len(ref.seq) >= maxTokens {
					keep := slices.Clone(ref.seq[len(ref.seq)-maxTokens/2:])
					ref, _ = newSuffixTrie([]byte(refParams))
					for _, k := range keep {
						ref.add(k)
					}
				}
				ref.add(tok)
			}
			q := sdk.DraftRequest{MaxDepth: 1 + r.IntN(24), Vocab: 64}
			want, _ := ref.Draft(context.Background(), &q)
			q.Appended = chunk
			got, _ := s.Draft(context.Background(), &q)
			if !slices.Equal(got.Tokens, want.Tokens) || !slices.Equal(got.Conf, want.Conf) {
				t.Fatalf("trial %d %s after %d tokens: got %v %v, the trie %v %v", trial, params, at, got.Tokens, got.Conf, want.Tokens, want.Conf)
			}
		}
	}
}

// randomCopySeq is n tokens of a vocab-token alphabet: random runs, and copies of
// earlier stretches (some with a token changed), as edited text and code repeat.
func randomCopySeq(r *rand.Rand, n, vocab int) []int32 {
	var seq []int32
	for len(seq) < n {
		if len(seq) > 8 && r.IntN(2) == 0 {
			from := r.IntN(len(seq) - 4)
			k := min(4+r.IntN(30), len(seq)-from)
			seq = append(seq, seq[from:from+k]...)
			if r.IntN(3) == 0 {
				seq[len(seq)-1-r.IntN(k)] = int32(r.IntN(vocab))
			}
			continue
		}
		for range 1 + r.IntN(10) {
			seq = append(seq, int32(r.IntN(vocab)))
		}
	}
	return seq[:n]
}

// zipfSeq is n prose-like tokens: Zipf-distributed (s = 1.1) over a 4096-token
// vocabulary, so short n-grams recur and long ones almost never do, as in prose.
func zipfSeq(n int) []int32 {
	z := rand.NewZipf(rand.New(rand.NewPCG(7, 7)), 1.1, 1, 4095)
	seq := make([]int32, n)
	for i := range seq {
		seq[i] = int32(z.Uint64())
	}
	return seq
}

// BenchmarkSuffixBuild: a first prompt of 10K or 100K tokens, prose-like or copy-heavy,
// told at once, then one proposal: the suffix trie of depth 32 that the drafter was
// against its suffix automaton. struct-B/op is the structure's memory.
func BenchmarkSuffixBuild(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		for _, kind := range []string{"prose", "copy"} {
			seq := zipfSeq(n)
			if kind == "copy" {
				seq = randomCopySeq(rand.New(rand.NewPCG(8, 8)), n, 4096)
			}
			q := sdk.DraftRequest{Appended: seq, MaxDepth: 8, Vocab: 4096}
			b.Run(fmt.Sprintf("trie/%s/%dK", kind, n/1000), func(b *testing.B) {
				for b.Loop() {
					s, _ := newSuffixTrie(nil)
					s.Draft(context.Background(), &q)
					b.ReportMetric(float64(cap(s.nodes)*20+len(s.root.keys)*12+cap(s.seq)*4), "struct-B/op")
				}
			})
			b.Run(fmt.Sprintf("automaton/%s/%dK", kind, n/1000), func(b *testing.B) {
				for b.Loop() {
					s, _ := NewSuffix(nil)
					s.Draft(context.Background(), &q)
					b.ReportMetric(float64(s.MemoryBytes()), "struct-B/op")
				}
			})
		}
	}
}
