package tokenizer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tinyHF is a hand-made byte-level BPE tokenizer.json: the 256 byte symbols are added by
// the test, plus merges "h e" → "he", "he l" → "hel", and escaped texts.
func writeTinyHF(t *testing.T, vocabExtra, merges, pre, config string) string {
	t.Helper()
	var sb strings.Builder
	sb.WriteString(`{"added_tokens":[{"id":300,"content":"<|end|>","special":true},{"id":301,"content":"<tool>","special":false}],`)
	sb.WriteString(`"pre_tokenizer":` + pre + `,"model":{"type":"BPE","vocab":{`)
	for b := 0; b < 256; b++ {
		if b > 0 {
			sb.WriteString(",")
		}
		sb.WriteString(strconvQuote(string(byteToRune[b])) + ":" + itoa(b))
	}
	if vocabExtra != "" {
		sb.WriteString("," + vocabExtra)
	}
	sb.WriteString(`},"merges":` + merges + `}}`)
	dir := t.TempDir()
	p := filepath.Join(dir, "tokenizer.json")
	if err := os.WriteFile(p, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if config != "" {
		if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(config), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func strconvQuote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	return `"` + r.Replace(s) + `"`
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

const byteLevelPre = `{"type":"ByteLevel","add_prefix_space":false,"use_regex":true}`

func TestFromHFTiny(t *testing.T) {
	for _, merges := range []string{`["h e","he l","\u0120 x"]`, `[["h","e"],["he","l"],["\u0120","x"]]`} {
		p := writeTinyHF(t, `"he":256,"hel":257,"\u0120x":258`, merges, byteLevelPre,
			`{"eos_token":{"content":"<|end|>"},"bos_token":null,"chat_template":[{"name":"tool_use","template":"T"},{"name":"default","template":"D"}]}`)
		tok, err := FromHF(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			text string
			want []int32
		}{
			{"hello", []int32{257, 'l', 'o'}},
			{" x", []int32{258}}, // the escaped \u0120 text
			{"a<tool>b<|end|>", []int32{'a', 301, 'b', '<', '|', 'e', 'n', 'd', '|', '>'}},
		} {
			got, err := tok.Encode(tc.text, true, false)
			if err != nil {
				t.Fatal(err)
			}
			if !equalIDs(got, tc.want) {
				t.Errorf("merges %s: Encode(%q) = %v, want %v", merges, tc.text, got, tc.want)
			}
		}
		if tok.EOS() != 300 || tok.BOS() != -1 || !tok.IsEOG(300) || tok.ChatTemplate() != "D" {
			t.Errorf("EOS %d BOS %d template %q", tok.EOS(), tok.BOS(), tok.ChatTemplate())
		}
		if tok.NVocab() != 302 || tok.TokenText(299) != "[PAD299]" {
			t.Errorf("NVocab %d, gap token %q", tok.NVocab(), tok.TokenText(299))
		}
	}
}

func TestFromHFErrors(t *testing.T) {
	dir := t.TempDir()
	bad := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name, path, want string
	}{
		{"missing", filepath.Join(dir, "nope.json"), "no such file"},
		{"truncated", bad("t1.json", `{"model":{"type":"BPE","vocab":{"a":1`), "parse"},
		{"wordpiece", bad("t2.json", `{"model":{"type":"WordPiece","vocab":{"a":0}}}`), "WordPiece"},
		{"no pre", bad("t3.json", `{"model":{"type":"BPE","vocab":{"a":0},"merges":[]}}`), "pre_tokenizer"},
		{"string id", bad("t4.json", `{"pre_tokenizer":`+byteLevelPre+`,"model":{"type":"BPE","vocab":{"a":"x"},"merges":[]}}`), "vocab"},
		{"negative id", bad("t5.json", `{"pre_tokenizer":`+byteLevelPre+`,"model":{"type":"BPE","vocab":{"a":-4},"merges":[]}}`), "out of range"},
		{"bad merge", bad("t6.json", `{"pre_tokenizer":`+byteLevelPre+`,"model":{"type":"BPE","vocab":{"a":0},"merges":["ab"]}}`), "merge"},
		{"metaspace", bad("t7.json", `{"pre_tokenizer":{"type":"Metaspace"},"model":{"type":"BPE","vocab":{"a":0},"merges":[]}}`), "Metaspace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FromHF(tc.path)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want it to mention %q", err, tc.want)
			}
		})
	}
	p := writeTinyHF(t, "", `[]`, byteLevelPre, `{"eos_token":"<|nope|>"}`)
	if _, err := FromHF(p); err == nil || !strings.Contains(err.Error(), "not in the vocabulary") {
		t.Fatalf("unknown eos_token: err %v", err)
	}
}

// TestHFHugeTokenID: a tokenizer.json whose one token claims id 2^30 is refused before
// a table of that size is allocated, by FromHF and HFMetadata alike.
func TestHFHugeTokenID(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokenizer.json")
	const body = `{"model":{"type":"BPE","vocab":{"a":1073741824},"merges":[]},"pre_tokenizer":{"type":"ByteLevel"}}`
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := FromHF(path); err == nil || !strings.Contains(err.Error(), "token id 1073741824") {
		t.Errorf("FromHF: err = %v, want one naming token id 1073741824", err)
	}
	if _, err := HFMetadata(path); err == nil || !strings.Contains(err.Error(), "token id 1073741824") {
		t.Errorf("HFMetadata: err = %v, want one naming token id 1073741824", err)
	}
}
