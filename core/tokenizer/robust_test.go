package tokenizer

import (
	"context"
	"math/rand"
	"strings"
	"testing"
	"unicode/utf8"
)

// tricky is an alphabet of codepoints from every class the pre-tokenizers distinguish.
var tricky = []string{"a", "Z", "é", "中", "ß", "0", "7", "٣", "Ⅻ", "'", "s", "t", "re", "L", "ve",
	" ", " ", "  ", "\t", "\n", "\r", "\r\n", "\u00a0", "\u3000", "\u2028", "\u0085", "\v",
	".", ",", "!", "?", "$", "+", "<", "~", "`", "|", "(", "—", "…", "。", "\u0301", "\u200d",
	"\x00", "\x1f", "\u0378", "😀", "\U0001F600\u200d", "ﬁ", "Ω"}

func randomText(r *rand.Rand, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteString(tricky[r.Intn(len(tricky))])
	}
	return b.String()
}

func splitWith(t *testing.T, st stage, s string) []string {
	t.Helper()
	var ct cpText
	ct.reset(s)
	spans, err := st.split(&ct, []span{{0, int32(len(ct.cps))}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, sp := range spans {
		out = append(out, s[ct.offs[sp.lo]:ct.offs[sp.hi]])
	}
	return out
}

// TestScannersMatchRegex proves the hand-written qwen2 scanner (llama.cpp runs the
// qwen2 regex through std::regex) and the llama3 scanner equal to the regex they
// replace, on random texts over a tricky alphabet.
func TestScannersMatchRegex(t *testing.T) {
	loadCptFlags()
	for _, tc := range []struct {
		name string
		fast stage
		re   string
	}{
		{"qwen2", llama3Stage{maxDigits: 1}, reQwen2},
		{"llama3", llama3Stage{maxDigits: 3}, reLlama3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			slow, err := newRegexStage(tc.re)
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewSource(1))
			for i := 0; i < 3000; i++ {
				s := randomText(r, 1+r.Intn(24))
				got, want := splitWith(t, tc.fast, s), splitWith(t, slow, s)
				if strings.Join(got, "\x00|") != strings.Join(want, "\x00|") {
					t.Fatalf("text %q:\n scanner %q\n   regex %q", s, got, want)
				}
			}
		})
	}
}

// TestEncodeRobust feeds hostile inputs to every kind of vocabulary: never a panic,
// and the decoded ids give back the input wherever the input is valid UTF-8.
func TestEncodeRobust(t *testing.T) {
	long := strings.Repeat("a", 1<<20)
	inputs := []struct {
		name string
		text string
	}{
		{"empty", ""},
		{"invalid utf8", "ok \xff\xfe bad \xc3 end \xe2\x82"},
		{"lone continuation", "\x80\x80abc"},
		{"surrogate", "\xed\xa0\x80x"},
		{"nul", "a\x00b"},
		{"1MB single word", long},
		{"specials", "<|im_start|><|im_end|><s></s><|endoftext|><think>"},
	}
	vocabs := map[string]*Tokenizer{
		"spm":   loadGGUF(t, "tokenizer", "ggml-vocab-llama-spm.gguf"),
		"gpt2":  loadGGUF(t, "tokenizer", "ggml-vocab-gpt-2.gguf"),
		"qwen3": loadHF(t, "qwen3"),
		"bert":  loadGGUF(t, "tokenizer", "ggml-vocab-bert-bge.gguf"),
	}
	for vname, tok := range vocabs {
		for _, in := range inputs {
			if in.name == "1MB single word" && testing.Short() {
				continue
			}
			t.Run(vname+"/"+in.name, func(t *testing.T) {
				for _, special := range []bool{false, true} {
					if special && len(in.text) > 1000 {
						continue
					}
					ids, err := tok.Encode(in.text, true, special)
					if err != nil {
						t.Fatalf("Encode: %v", err)
					}
					for _, id := range ids {
						if id < 0 || int(id) >= tok.NVocab() {
							t.Fatalf("id %d out of range", id)
						}
					}
					got, err := tok.Decode(ids)
					if err != nil {
						t.Fatal(err)
					}
					if !utf8.ValidString(in.text) || special || in.name == "specials" || tok.kind == kindWPM {
						continue
					}
					if tok.BOS() >= 0 && tok.AddBOS() {
						got = strings.TrimPrefix(got, tok.TokenText(tok.BOS()))
						if tok.kind == kindSPM { // llama.cpp strips the prefix space only from the first piece
							got = strings.TrimPrefix(got, " ")
						}
					}
					if got != in.text {
						t.Fatalf("round trip: got %d bytes, want %d", len(got), len(in.text))
					}
				}
			})
		}
	}
}

func TestInvalidUTF8LikeLlamaCpp(t *testing.T) {
	// llama.cpp's BPE path reads each invalid byte as U+FFFD; SPM keeps raw bytes.
	qwen := loadHF(t, "qwen3")
	a, _ := qwen.Encode("x\xffy", false, false)
	b, _ := qwen.Encode("x\uFFFDy", false, false)
	if !equalIDs(a, b) {
		t.Fatalf("BPE invalid byte: %v, want as U+FFFD %v", a, b)
	}
	spm := loadGGUF(t, "tokenizer", "ggml-vocab-llama-spm.gguf")
	ids, _ := spm.Encode("\xff", false, false)
	got, _ := spm.Decode(ids)
	if got != "\xff" {
		t.Fatalf("SPM invalid byte decodes to %q, want \\xff", got)
	}
}

func TestDecodeErrors(t *testing.T) {
	tok := loadHF(t, "qwen3")
	for _, ids := range [][]int32{{-1}, {int32(tok.NVocab())}, {1, 2, 1 << 30}} {
		if _, err := tok.Decode(ids); err == nil || !strings.Contains(err.Error(), "out of range") {
			t.Fatalf("Decode(%v): err %v, want out of range", ids, err)
		}
	}
	if p := tok.Piece(-3); p != nil {
		t.Fatalf("Piece(-3) = %q, want nil", p)
	}
	if s := tok.TokenText(int32(tok.NVocab())); s != "" {
		t.Fatalf("TokenText(n) = %q", s)
	}
	if _, err := tok.NewDecoder().Add(-1); err == nil {
		t.Fatal("StreamDecoder.Add(-1) accepted")
	}
}

// TestStreamDecoder checks that streamed text equals the concatenated pieces and that no
// emitted chunk ends inside a UTF-8 character.
func TestStreamDecoder(t *testing.T) {
	for _, name := range []string{"qwen3", "llama3"} {
		tok := loadHF(t, name)
		text := "Grüße, 世界! 😀👍🏽 naïve café — ∑x² ok"
		ids, err := tok.Encode(text, false, false)
		if err != nil {
			t.Fatal(err)
		}
		d := tok.NewDecoder()
		var out strings.Builder
		for _, id := range ids {
			s, err := d.Add(id)
			if err != nil {
				t.Fatal(err)
			}
			if !utf8.ValidString(s) {
				t.Fatalf("%s: chunk %q is not whole UTF-8", name, s)
			}
			out.WriteString(s)
		}
		out.WriteString(d.Flush())
		if out.String() != text {
			t.Fatalf("%s: streamed %q, want %q", name, out.String(), text)
		}
	}
	// Byte tokens: a character split over SPM <0xNN> tokens appears only when complete.
	spm := loadGGUF(t, "tokenizer", "ggml-vocab-llama-spm.gguf")
	d := spm.NewDecoder()
	var chunks []string
	for _, b := range []byte("😀") {
		s, _ := d.Add(spm.byteTok[b])
		chunks = append(chunks, s)
	}
	if strings.Join(chunks, "|") != "|||😀" {
		t.Fatalf("byte tokens streamed as %q", chunks)
	}
	// Invalid bytes are not held back forever.
	s, _ := d.Add(spm.byteTok[0xff])
	s2, _ := d.Add(spm.byteTok['a'])
	if s+s2 != "\xffa" || d.Flush() != "" {
		t.Fatalf("invalid byte streamed as %q %q", s, s2)
	}
	// An incomplete character is returned by Flush.
	d.Add(spm.byteTok[0xe4])
	if got := d.Flush(); got != "\xe4" {
		t.Fatalf("Flush = %q, want \\xe4", got)
	}
}

func TestSpecialTokensAndEOG(t *testing.T) {
	qwen := loadHF(t, "qwen3")
	im := qwen.toID["<|im_end|>"]
	for _, tc := range []struct {
		text    string
		special bool
		want    []int32
	}{
		{"<|im_start|>user\nhi<|im_end|>", true, []int32{151644, 872, 198, 6023, 151645}},
		{"<think>x</think>", false, []int32{151667, 87, 151668}}, // user-defined: always matched
	} {
		got, err := qwen.Encode(tc.text, false, tc.special)
		if err != nil {
			t.Fatal(err)
		}
		if !equalIDs(got, tc.want) {
			t.Errorf("Encode(%q, special=%v) = %v, want %v", tc.text, tc.special, got, tc.want)
		}
	}
	plain, _ := qwen.Encode("<|im_end|>", false, false)
	if len(plain) < 2 {
		t.Errorf("control text without parseSpecial gave %v, want plain-text tokens", plain)
	}
	for _, x := range []string{"<|im_end|>", "<|endoftext|>"} {
		if !qwen.IsEOG(qwen.toID[x]) {
			t.Errorf("%s not EOG", x)
		}
	}
	if qwen.IsEOG(qwen.toID["<|im_start|>"]) || qwen.IsEOG(872) {
		t.Error("non-EOG token reported as EOG")
	}
	if qwen.EOS() != im || qwen.BOS() != -1 || qwen.AddBOS() {
		t.Errorf("qwen3 BOS/EOS/AddBOS = %d/%d/%v, want -1/%d/false", qwen.BOS(), qwen.EOS(), qwen.AddBOS(), im)
	}
	llama := loadHF(t, "llama3")
	if llama.BOS() != 128000 || !llama.AddBOS() || !llama.IsEOG(llama.toID["<|eot_id|>"]) || !llama.IsEOG(llama.EOS()) {
		t.Errorf("llama3 BOS %d AddBOS %v EOS %d", llama.BOS(), llama.AddBOS(), llama.EOS())
	}
	ids, _ := llama.Encode("hi", true, false)
	if ids[0] != 128000 {
		t.Errorf("llama3 Encode(addSpecial) = %v, want BOS first", ids)
	}
}

func FuzzEncodeDecode(f *testing.F) {
	for _, s := range []string{"", "Hello world", "a\xffb", "  \n\t x", "<|im_start|>", "中文 123 'll"} {
		f.Add(s, false)
	}
	tok := loadHF(f, "qwen3")
	spm := loadGGUF(f, "tokenizer", "ggml-vocab-llama-spm.gguf")
	f.Fuzz(func(t *testing.T, s string, special bool) {
		for _, tk := range []*Tokenizer{tok, spm} {
			ids, err := tk.Encode(s, false, special)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tk.Decode(ids)
			if err != nil {
				t.Fatal(err)
			}
			if utf8.ValidString(s) && !special && tk == tok && got != s {
				t.Fatalf("round trip %q → %q", s, got)
			}
		}
	})
}

// TestWordCacheSameIDs: the per-call word cache never changes the result.
func TestWordCacheSameIDs(t *testing.T) {
	tok := loadHF(t, "qwen3")
	text := mixedText(t, 200<<10)
	a, err := tok.encode(context.Background(), text, false, false, true)
	if err != nil {
		t.Fatal(err)
	}
	b, err := tok.encode(context.Background(), text, false, false, false)
	if err != nil {
		t.Fatal(err)
	}
	if !equalIDs(a, b) {
		t.Fatal("word cache changed the ids")
	}
}

// TestAllPreTokenizers builds every tokenizer.ggml.pre type and checks, on random text,
// that its pieces are non-empty and concatenate back to the text.
func TestAllPreTokenizers(t *testing.T) {
	loadCptFlags()
	r := rand.New(rand.NewSource(2))
	texts := []string{"", "Hello world's 12345 test\n\n  x", "中文ひらがなカタカナ 한국어 ١٢٣"}
	for i := 0; i < 50; i++ {
		texts = append(texts, randomText(r, 1+r.Intn(30)))
	}
	for name, pt := range preTypes {
		t.Run(name, func(t *testing.T) {
			p, err := newPreTokenizer(name, preRegexes[pt.regexes])
			if err != nil {
				t.Fatal(err)
			}
			var ct cpText
			var bufs [2][]span
			for _, s := range texts {
				ct.reset(s)
				var sb strings.Builder
				err := p.split(&ct, &bufs, func(lo, hi int) {
					if hi <= lo {
						t.Fatalf("empty piece in %q", s)
					}
					sb.WriteString(s[lo:hi])
				})
				if err != nil {
					t.Fatal(err)
				}
				if sb.String() != s {
					t.Fatalf("pieces of %q join to %q", s, sb.String())
				}
			}
		})
	}
}

// FuzzStreamDecoder feeds arbitrary bytes as SPM byte tokens: the chunks always add up to
// the bytes, and when the bytes are valid UTF-8 every chunk is too.
func FuzzStreamDecoder(f *testing.F) {
	for _, s := range []string{"", "abc", "é😀中", "\xff\xfe", "\xe4\xb8", "a\xf0\x9f\x98"} {
		f.Add([]byte(s))
	}
	spm := loadGGUF(f, "tokenizer", "ggml-vocab-llama-spm.gguf")
	f.Fuzz(func(t *testing.T, data []byte) {
		d := spm.NewDecoder()
		var all strings.Builder
		valid := utf8.Valid(data)
		for _, b := range data {
			s, err := d.Add(spm.byteTok[b])
			if err != nil {
				t.Fatal(err)
			}
			if valid && !utf8.ValidString(s) {
				t.Fatalf("chunk %q of valid input %q", s, data)
			}
			all.WriteString(s)
		}
		all.WriteString(d.Flush())
		if all.String() != string(data) {
			t.Fatalf("chunks %q, want %q", all.String(), data)
		}
	})
}
