package synth

import (
	"reflect"
	"strings"
	"testing"

	"github.com/minfer/minfer/core/gguf"
	"github.com/minfer/minfer/internal/testpath"
)

func kvMap(p *Plan) map[string]gguf.Value {
	m := map[string]gguf.Value{}
	for _, kv := range p.KVs {
		m[kv.Key] = kv.Value
	}
	return m
}

func tinyFlags(extra map[string]string) map[string]string {
	m := map[string]string{"arch": "qwen2", "n-embd": "64", "n-layer": "1", "n-head": "4", "n-ff": "128", "type": "q8_0"}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

func TestSynthVocabFromGGUF(t *testing.T) {
	src := testpath.Path(t, "tokenizer", "ggml-vocab-gpt-2.gguf")
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := mustPlan(t, "", tinyFlags(map[string]string{"vocab": src}))
	if p.Opts.NVocab != 50257 {
		t.Errorf("n_vocab = %d, want the vocabulary's 50257", p.Opts.NVocab)
	}
	got := kvMap(p)
	n := 0
	for _, kv := range f.KVs {
		if !strings.HasPrefix(kv.Key, "tokenizer.") {
			continue
		}
		n++
		if !reflect.DeepEqual(got[kv.Key], kv.Value) {
			t.Errorf("%s not copied unchanged", kv.Key)
		}
	}
	if n < 5 {
		t.Errorf("only %d tokenizer keys in the source", n)
	}
	emb := planSpecs(p)["token_embd.weight"]
	if !reflect.DeepEqual(emb.dims, []uint64{64, 50257}) {
		t.Errorf("token_embd dims %v, want [64 50257]", emb.dims)
	}

	// A preset with more rows than tokens pads, with scores for an SPM vocabulary.
	spm := testpath.Path(t, "tokenizer", "ggml-vocab-llama-spm.gguf")
	p = mustPlan(t, "", tinyFlags(map[string]string{"vocab": spm, "n-vocab": "32064"}))
	got = kvMap(p)
	toks := got["tokenizer.ggml.tokens"].V.([]string)
	scores := got["tokenizer.ggml.scores"].V.([]float32)
	types := got["tokenizer.ggml.token_type"].V.([]int32)
	if len(toks) != 32064 || len(scores) != 32064 || len(types) != 32064 {
		t.Fatalf("padded to %d tokens, %d scores, %d types; want 32064", len(toks), len(scores), len(types))
	}
	if toks[32063] != "[PAD32063]" || scores[32063] != -1000 || types[32063] != tokUnused || toks[31999] == "[PAD31999]" {
		t.Errorf("padding: %q %v %d; original last %q", toks[32063], scores[32063], types[32063], toks[31999])
	}
}

func TestSynthVocabFromHF(t *testing.T) {
	tests := []struct {
		dir      string
		n        int
		pre      string
		bos, eos uint32
		merges   int
		addBos   any
		typeOf   map[int]int32
		firstTok string
		template bool
	}{
		{"qwen3", 151669, "qwen2", 151643, 151645, 151387, false,
			map[int]int32{0: tokNormal, 151643: tokControl, 151645: tokControl, 151659: tokControl, 151667: tokUserDefined}, "!", true},
		{"llama3", 128256, "llama-bpe", 128000, 128001, 280147, true,
			map[int]int32{0: tokNormal, 128000: tokControl, 128255: tokControl}, "!", true},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			p := mustPlan(t, "", tinyFlags(map[string]string{"vocab": testpath.Path(t, "tokenizer", "hf", tt.dir, "tokenizer.json")}))
			kv := kvMap(p)
			toks := kv["tokenizer.ggml.tokens"].V.([]string)
			types := kv["tokenizer.ggml.token_type"].V.([]int32)
			if len(toks) != tt.n || p.Opts.NVocab != tt.n || toks[0] != tt.firstTok {
				t.Errorf("%d tokens (n_vocab %d), first %q; want %d, %q", len(toks), p.Opts.NVocab, toks[0], tt.n, tt.firstTok)
			}
			for id, want := range tt.typeOf {
				if types[id] != want {
					t.Errorf("token %d %q: type %d, want %d", id, toks[id], types[id], want)
				}
			}
			checks := map[string]any{
				"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": tt.pre,
				"tokenizer.ggml.bos_token_id": tt.bos, "tokenizer.ggml.eos_token_id": tt.eos,
				"tokenizer.ggml.add_bos_token": tt.addBos,
			}
			for k, want := range checks {
				if got := kv[k].V; !reflect.DeepEqual(got, want) {
					t.Errorf("%s = %v, want %v", k, got, want)
				}
			}
			if m := kv["tokenizer.ggml.merges"].V.([]string); len(m) != tt.merges || strings.Count(m[0], " ") != 1 {
				t.Errorf("%d merges (first %q), want %d of form \"a b\"", len(m), m[0], tt.merges)
			}
			if tmpl, _ := kv["tokenizer.chat_template"].V.(string); (tmpl != "") != tt.template {
				t.Errorf("chat template present = %v, want %v", tmpl != "", tt.template)
			}
		})
	}
	// The trained pair's tokenizer.json: plain ByteLevel pre-tokenizer, no config.
	p := mustPlan(t, "", tinyFlags(map[string]string{"vocab": testpath.Path(t, "models", "trained", "tokenizer.json")}))
	if kv := kvMap(p); kv["tokenizer.ggml.pre"].V != "gpt-2" || p.Opts.NVocab != 4096 {
		t.Errorf("trained tokenizer: pre %v, n_vocab %d; want gpt-2, 4096", kv["tokenizer.ggml.pre"].V, p.Opts.NVocab)
	}
	// The Qwen3-0.6B preset pads the 151669 tokens to its 151936 embedding rows.
	p = mustPlan(t, "qwen3-0.6b", map[string]string{"type": "q8_0", "n-layer": "1",
		"vocab": testpath.Path(t, "tokenizer", "hf", "qwen3", "tokenizer.json")})
	toks := kvMap(p)["tokenizer.ggml.tokens"].V.([]string)
	if len(toks) != 151936 || toks[151935] != "[PAD151935]" || p.Opts.NVocab != 151936 {
		t.Errorf("qwen3-0.6b with the Qwen3 vocabulary: %d tokens, n_vocab %d", len(toks), p.Opts.NVocab)
	}
}

// TestGeneratedVocab: every merge joins two existing tokens into a later one, tokens are
// unique, and the byte tokens cover all 256 bytes.
func TestGeneratedVocab(t *testing.T) {
	for _, n := range []int{259, 2048, 40000} {
		v, err := generatedVocab(n, "qwen2")
		if err != nil {
			t.Fatal(err)
		}
		var toks, merges []string
		for _, kv := range v.kvs {
			switch kv.Key {
			case "tokenizer.ggml.tokens":
				toks = kv.Value.V.([]string)
			case "tokenizer.ggml.merges":
				merges = kv.Value.V.([]string)
			}
		}
		if len(toks) != n || len(merges) != n-259 {
			t.Fatalf("n=%d: %d tokens, %d merges", n, len(toks), len(merges))
		}
		id := map[string]int{}
		for i, tok := range toks {
			if _, dup := id[tok]; dup {
				t.Fatalf("n=%d: duplicate token %q", n, tok)
			}
			id[tok] = i
		}
		for i, m := range merges {
			a, b, ok := strings.Cut(m, " ")
			ia, oka := id[a]
			ib, okb := id[b]
			ic, okc := id[a+b]
			if !ok || !oka || !okb || !okc || ic != 259+i || ia >= ic || ib >= ic {
				t.Fatalf("n=%d: merge %d %q is not two earlier tokens making token %d", n, i, m, 259+i)
			}
		}
		seen := map[rune]bool{}
		for _, s := range toks[:256] {
			r := []rune(s)
			if len(r) != 1 || seen[r[0]] {
				t.Fatalf("byte token %q is not one distinct symbol", s)
			}
			seen[r[0]] = true
		}
	}
}
