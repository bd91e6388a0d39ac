package model

import (
	"bytes"
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"github.com/minfer/minfer/core/gguf"
	"github.com/minfer/minfer/core/quant"
)

// tiny describes a small random F32 model file for loader tests.
type tiny struct {
	arch    string
	skip    map[string]bool     // tensors to leave out
	reshape map[string][]uint64 // tensors written with other dims
	retype  map[string]quant.Type
	meta    map[string]any // extra or overriding metadata
}

func (tc tiny) build(t *testing.T) *gguf.File {
	t.Helper()
	const embd, heads, kvh, ff, vocab, layers = 32, 4, 2, 64, 16, 2
	hd := embd / heads
	w := gguf.NewWriter()
	set := func(k string, v any) {
		if err := w.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	set("general.architecture", tc.arch)
	a := tc.arch + "."
	set(a+"embedding_length", uint32(embd))
	set(a+"block_count", uint32(layers))
	set(a+"attention.head_count", uint32(heads))
	set(a+"attention.head_count_kv", uint32(kvh))
	set(a+"feed_forward_length", uint32(ff))
	set(a+"context_length", uint32(64))
	set(a+"attention.layer_norm_rms_epsilon", float32(1e-5))
	for k, v := range tc.meta {
		set(k, v)
	}
	seed := uint32(1)
	add := func(name string, dims ...uint64) {
		if tc.skip[name] {
			return
		}
		if d, ok := tc.reshape[name]; ok {
			dims = d
		}
		typ := quant.F32
		if ty, ok := tc.retype[name]; ok {
			typ = ty
		}
		n := uint64(1)
		for _, d := range dims {
			n *= d
		}
		vals := make([]float32, n)
		for i := range vals {
			seed = seed*1664525 + 1013904223
			vals[i] = float32(int32(seed>>8)%2000) / 4000
		}
		var data []byte
		if typ == quant.F32 {
			var buf bytes.Buffer
			binary.Write(&buf, binary.LittleEndian, vals)
			data = buf.Bytes()
		} else {
			rb, err := typ.RowBytes(int(n))
			if err != nil {
				t.Fatal(err)
			}
			data = make([]byte, rb)
			if err := quant.Quantize(typ, data, vals); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.AddTensor(name, typ, dims, data); err != nil {
			t.Fatal(err)
		}
	}
	add("token_embd.weight", embd, vocab)
	add("output_norm.weight", embd)
	add("output.weight", embd, vocab)
	for l := range layers {
		add(blk(l, "attn_norm.weight"), embd)
		add(blk(l, "attn_q.weight"), embd, heads*uint64(hd))
		add(blk(l, "attn_k.weight"), embd, kvh*uint64(hd))
		add(blk(l, "attn_v.weight"), embd, kvh*uint64(hd))
		add(blk(l, "attn_output.weight"), heads*uint64(hd), embd)
		add(blk(l, "ffn_norm.weight"), embd)
		add(blk(l, "ffn_gate.weight"), embd, ff)
		add(blk(l, "ffn_up.weight"), embd, ff)
		add(blk(l, "ffn_down.weight"), ff, embd)
		switch tc.arch {
		case "qwen2":
			add(blk(l, "attn_q.bias"), heads*uint64(hd))
			add(blk(l, "attn_k.bias"), kvh*uint64(hd))
			add(blk(l, "attn_v.bias"), kvh*uint64(hd))
		case "qwen3":
			add(blk(l, "attn_q_norm.weight"), uint64(hd))
			add(blk(l, "attn_k_norm.weight"), uint64(hd))
		}
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestLoadErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		file tiny
		want []string
	}{
		{"unknown arch", tiny{arch: "mamba"}, []string{`unknown architecture "mamba"`, "llama, qwen2, qwen3"}},
		{"missing tensors listed", tiny{arch: "llama", skip: map[string]bool{"blk.1.ffn_up.weight": true, "output_norm.weight": true}},
			[]string{"2 required tensor(s) missing", "output_norm.weight", "blk.1.ffn_up.weight"}},
		{"missing qwen2 bias", tiny{arch: "qwen2", skip: map[string]bool{"blk.0.attn_k.bias": true}}, []string{"blk.0.attn_k.bias"}},
		{"missing qwen3 norm", tiny{arch: "qwen3", skip: map[string]bool{"blk.1.attn_q_norm.weight": true}}, []string{"blk.1.attn_q_norm.weight"}},
		{"wrong shape", tiny{arch: "llama", reshape: map[string][]uint64{"blk.0.attn_k.weight": {32, 8}}},
			[]string{`tensor "blk.0.attn_k.weight": shape [32 8], want [32 16]`}},
		{"vector not f32", tiny{arch: "llama", retype: map[string]quant.Type{"blk.0.ffn_norm.weight": quant.F16}},
			[]string{`"blk.0.ffn_norm.weight": type F16, want F32`}},
		{"missing key", tiny{arch: "llama", meta: map[string]any{"llama.block_count": "two"}}, []string{`"llama.block_count"`}},
		{"absurd layer count", tiny{arch: "llama", meta: map[string]any{"llama.block_count": uint32(1 << 30)}}, []string{"block_count 1073741824 exceeds"}},
		{"bad gqa", tiny{arch: "llama", meta: map[string]any{"llama.attention.head_count_kv": uint32(3)}}, []string{"not a multiple of head_count_kv 3"}},
		{"unsupported rope scaling", tiny{arch: "llama", meta: map[string]any{"llama.rope.scaling.type": "yarn"}}, []string{`rope scaling type "yarn"`}},
		{"vocab mismatch", tiny{arch: "llama", meta: map[string]any{"llama.vocab_size": uint32(17)}}, []string{"vocab_size 17 != token_embd rows 16"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(nil, tc.file.build(t), Options{})
			if err == nil {
				t.Fatal("got nil error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("got %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestReadParams(t *testing.T) {
	f := tiny{arch: "qwen3", meta: map[string]any{
		"qwen3.attention.key_length":   uint32(16),
		"qwen3.attention.value_length": uint32(16),
		"qwen3.rope.freq_base":         float32(1e6),
		"qwen3.rope.scaling.type":      "linear",
		"qwen3.rope.scaling.factor":    float32(4),
	}}.build(t)
	p, err := readParams(f, "qwen3", archs["qwen3"].rope)
	if err != nil {
		t.Fatal(err)
	}
	if p.HeadDim != 16 || p.QDim() != 64 || p.KVDim() != 32 || p.Rope.Base != 1e6 || p.Rope.FreqScale != 0.25 || p.CtxTrain != 64 {
		t.Fatalf("got %+v", p)
	}
	if math.Abs(float64(p.Attn.Scale)-0.25) > 1e-7 {
		t.Fatalf("attention scale: got %v, want 0.25", p.Attn.Scale)
	}
}
