package synth

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/minfer/minfer/core/gguf"
	"github.com/minfer/minfer/core/quant"
	"github.com/minfer/minfer/internal/testpath"
)

// resolveFlags resolves flags (command-line flag names without the dashes, as
// `minfer synth` passes them to Resolve) over preset.
func resolveFlags(t *testing.T, preset string, flags map[string]string) Options {
	t.Helper()
	o, set := Options{}, map[string]bool{}
	for k, v := range flags {
		set[k] = true
		var err error
		switch k {
		case "arch":
			o.Arch = v
		case "type":
			o.Type = v
		case "vocab":
			o.Vocab = v
		case "tied":
			o.Tied = v == "true"
		case "fast":
			o.Fast = v == "true"
		case "init":
			o.Init = v
		case "seed":
			_, err = fmt.Sscan(v, &o.Seed)
		default:
			dst, ok := map[string]*int{"n-embd": &o.NEmbd, "n-layer": &o.NLayer, "n-head": &o.NHead, "n-head-kv": &o.NHeadKV,
				"head-dim": &o.HeadDim, "n-ff": &o.NFF, "n-vocab": &o.NVocab, "ctx": &o.Ctx}[k]
			if !ok {
				t.Fatalf("BUG: test flag %q", k)
			}
			_, err = fmt.Sscan(v, dst)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	r, err := Resolve(o, preset, set)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// mustPlan resolves flags like the CLI and plans the model.
func mustPlan(t *testing.T, preset string, flags map[string]string) *Plan {
	t.Helper()
	p, err := NewPlan(resolveFlags(t, preset, flags))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type tensorSpec struct {
	typ  quant.Type
	dims []uint64
}

func planSpecs(p *Plan) map[string]tensorSpec {
	m := map[string]tensorSpec{}
	for _, t := range p.Tensors {
		m[t.Name] = tensorSpec{t.Type, t.Dims}
	}
	return m
}

func compareSpecs(t *testing.T, got, want map[string]tensorSpec) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("got %d tensors, want %d", len(got), len(want))
	}
	for name, w := range want {
		g, ok := got[name]
		if !ok {
			t.Errorf("missing tensor %s", name)
			continue
		}
		if g.typ != w.typ || !reflect.DeepEqual(g.dims, w.dims) {
			t.Errorf("%s: got %s %v, want %s %v", name, g.typ, g.dims, w.typ, w.dims)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("unexpected tensor %s", name)
		}
	}
}

// TestPlanQwen25_7B_Q4KM: the tensors of a real Qwen2.5-7B-Instruct Q4_K_M GGUF
// (llama-quantize of the official conversion): 339 tensors, 28 blocks; token_embd
// Q4_K and output Q6_K (3584 is a multiple of 256, so no fallbacks); attn_v and
// ffn_down Q6_K in blocks 0-2, 5, 8, 11, 14, 17, 20, 23-27, Q4_K elsewhere.
func TestPlanQwen25_7B_Q4KM(t *testing.T) {
	p := mustPlan(t, "qwen2.5-7b", map[string]string{"type": "q4_k_m"})
	q6 := map[int]bool{0: true, 1: true, 2: true, 5: true, 8: true, 11: true, 14: true, 17: true, 20: true, 23: true, 24: true, 25: true, 26: true, 27: true}
	want := map[string]tensorSpec{
		"token_embd.weight":  {quant.Q4_K, []uint64{3584, 152064}},
		"output_norm.weight": {quant.F32, []uint64{3584}},
		"output.weight":      {quant.Q6_K, []uint64{3584, 152064}},
	}
	for i := range 28 {
		vd := quant.Q4_K
		if q6[i] {
			vd = quant.Q6_K
		}
		b := fmt.Sprintf("blk.%d.", i)
		for name, s := range map[string]tensorSpec{
			"attn_norm.weight":   {quant.F32, []uint64{3584}},
			"attn_q.weight":      {quant.Q4_K, []uint64{3584, 3584}},
			"attn_q.bias":        {quant.F32, []uint64{3584}},
			"attn_k.weight":      {quant.Q4_K, []uint64{3584, 512}},
			"attn_k.bias":        {quant.F32, []uint64{512}},
			"attn_v.weight":      {vd, []uint64{3584, 512}},
			"attn_v.bias":        {quant.F32, []uint64{512}},
			"attn_output.weight": {quant.Q4_K, []uint64{3584, 3584}},
			"ffn_norm.weight":    {quant.F32, []uint64{3584}},
			"ffn_gate.weight":    {quant.Q4_K, []uint64{3584, 18944}},
			"ffn_up.weight":      {quant.Q4_K, []uint64{3584, 18944}},
			"ffn_down.weight":    {vd, []uint64{18944, 3584}},
		} {
			want[b+name] = s
		}
	}
	if len(want) != 339 {
		t.Fatalf("BUG: want list has %d tensors", len(want))
	}
	compareSpecs(t, planSpecs(p), want)
	if got := p.Params(); got != 7615616512 {
		t.Errorf("params = %d, want 7615616512 (Qwen2.5-7B)", got)
	}
	kv := map[string]any{}
	for _, x := range p.KVs {
		kv[x.Key] = x.Value.V
	}
	for k, v := range map[string]any{
		"general.architecture": "qwen2", "general.file_type": uint32(15), "qwen2.block_count": uint32(28),
		"qwen2.embedding_length": uint32(3584), "qwen2.feed_forward_length": uint32(18944),
		"qwen2.attention.head_count": uint32(28), "qwen2.attention.head_count_kv": uint32(4),
		"qwen2.context_length": uint32(32768), "qwen2.rope.freq_base": float32(1e6),
		"qwen2.attention.layer_norm_rms_epsilon": float32(1e-6), "general.quantization_version": uint32(2),
	} {
		if !reflect.DeepEqual(kv[k], v) {
			t.Errorf("%s = %v (%T), want %v (%T)", k, kv[k], kv[k], v, v)
		}
	}
	if _, ok := kv["qwen2.attention.key_length"]; ok {
		t.Errorf("key_length written although head_dim = n_embd/n_head")
	}
	if toks := kv["tokenizer.ggml.tokens"].([]string); len(toks) != 152064 {
		t.Errorf("%d tokens, want 152064", len(toks))
	}
}

// TestPlanQwen25_7B_Q3KM: llama-quantize's Q3_K_M mixture on the 7B shape (3584 and
// 18944 are multiples of 256: no fallbacks): Q3_K, output Q6_K, attn_output Q4_K,
// attn_v Q5_K in blocks 0-1 and Q4_K after, ffn_down Q5_K in block 0 (28/16 = 1) and
// Q4_K after.
func TestPlanQwen25_7B_Q3KM(t *testing.T) {
	p := mustPlan(t, "qwen2.5-7b", map[string]string{"type": "q3_k_m"})
	got := planSpecs(p)
	for name, want := range map[string]quant.Type{
		"token_embd.weight": quant.Q3_K, "output.weight": quant.Q6_K,
		"blk.0.attn_q.weight": quant.Q3_K, "blk.27.ffn_up.weight": quant.Q3_K, "blk.5.attn_k.weight": quant.Q3_K,
		"blk.0.attn_v.weight": quant.Q5_K, "blk.1.attn_v.weight": quant.Q5_K, "blk.2.attn_v.weight": quant.Q4_K,
		"blk.0.ffn_down.weight": quant.Q5_K, "blk.1.ffn_down.weight": quant.Q4_K, "blk.27.ffn_down.weight": quant.Q4_K,
		"blk.3.attn_output.weight": quant.Q4_K,
	} {
		if got[name].typ != want {
			t.Errorf("%s: %v, want %v", name, got[name].typ, want)
		}
	}
}

// TestPlanQwen25_05B_Q4KM: a real Qwen2.5-0.5B-Instruct Q4_K_M has 290 tensors; its
// row length 896 is not a multiple of 256, so the tied token_embd is Q8_0 (output rule),
// q/k/v/o/gate/up fall back from Q4_K to Q5_0 and the Q6_K attn_v to Q8_0; ffn_down
// (rows of 4864 = 19·256) keeps Q4_K/Q6_K. More-bits layers of 24: 0-2, 5, 8, ..., 20, 21-23.
func TestPlanQwen25_05B_Q4KM(t *testing.T) {
	p := mustPlan(t, "qwen2.5-0.5b", map[string]string{"type": "q4_k_m"})
	more := map[int]bool{0: true, 1: true, 2: true, 5: true, 8: true, 11: true, 14: true, 17: true, 20: true, 21: true, 22: true, 23: true}
	want := map[string]tensorSpec{
		"token_embd.weight":  {quant.Q8_0, []uint64{896, 151936}},
		"output_norm.weight": {quant.F32, []uint64{896}},
	}
	for i := range 24 {
		v, d := quant.Q5_0, quant.Q4_K
		if more[i] {
			v, d = quant.Q8_0, quant.Q6_K
		}
		b := fmt.Sprintf("blk.%d.", i)
		for name, s := range map[string]tensorSpec{
			"attn_norm.weight": {quant.F32, []uint64{896}}, "attn_q.weight": {quant.Q5_0, []uint64{896, 896}},
			"attn_q.bias": {quant.F32, []uint64{896}}, "attn_k.weight": {quant.Q5_0, []uint64{896, 128}},
			"attn_k.bias": {quant.F32, []uint64{128}}, "attn_v.weight": {v, []uint64{896, 128}},
			"attn_v.bias": {quant.F32, []uint64{128}}, "attn_output.weight": {quant.Q5_0, []uint64{896, 896}},
			"ffn_norm.weight": {quant.F32, []uint64{896}}, "ffn_gate.weight": {quant.Q5_0, []uint64{896, 4864}},
			"ffn_up.weight": {quant.Q5_0, []uint64{896, 4864}}, "ffn_down.weight": {d, []uint64{4864, 896}},
		} {
			want[b+name] = s
		}
	}
	if len(want) != 290 {
		t.Fatalf("BUG: want list has %d tensors", len(want))
	}
	compareSpecs(t, planSpecs(p), want)
	if got := p.Params(); got != 494032768 {
		t.Errorf("params = %d, want 494032768 (Qwen2.5-0.5B)", got)
	}
}

// synthFamilies are the shapes of the models in ../shared/testdata/models/synthetic.
var synthFamilies = map[string]map[string]string{
	"llama": {"arch": "llama", "n-embd": "256", "n-layer": "2", "n-head": "8", "n-head-kv": "4", "n-ff": "768", "n-vocab": "2048"},
	"qwen2": {"arch": "qwen2", "n-embd": "256", "n-layer": "2", "n-head": "8", "n-head-kv": "2", "n-ff": "704", "n-vocab": "2048", "tied": "true"},
	"qwen3": {"arch": "qwen3", "n-embd": "256", "n-layer": "2", "n-head": "8", "n-head-kv": "4", "head-dim": "64", "n-ff": "704", "n-vocab": "2048", "tied": "true"},
}

// TestPlanMatchesLlamaQuantize plans each synthetic family at each type and wants the
// tensor names, shapes and types of the file llama-quantize made (the README's table).
func TestPlanMatchesLlamaQuantize(t *testing.T) {
	for fam, flags := range synthFamilies {
		for _, typ := range []string{"f16", "q8_0", "q4_0", "q4_k_m", "q6_k", "iq4_nl", "iq4_xs", "iq3_s"} {
			dir := "models/synthetic"
			if strings.HasPrefix(typ, "iq") {
				if fam == "qwen2" {
					continue // quant-types has llama and qwen3 only
				}
				dir = "quant-types"
			}
			t.Run(fam+"-"+typ, func(t *testing.T) {
				fl := map[string]string{"type": typ}
				for k, v := range flags {
					fl[k] = v
				}
				p := mustPlan(t, "", fl)
				f, err := gguf.Open(testpath.Path(t, dir, "synth-"+fam+"-"+typ+".gguf"))
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				want := map[string]tensorSpec{}
				for _, ti := range f.Tensors {
					want[ti.Name] = tensorSpec{ti.Type, ti.Dims}
				}
				compareSpecs(t, planSpecs(p), want)
				for _, kv := range p.KVs {
					if strings.HasPrefix(kv.Key, fam+".") || kv.Key == "general.file_type" {
						if v, ok := f.Get(kv.Key); !ok || !reflect.DeepEqual(v, kv.Value) {
							t.Errorf("%s = %v, llama.cpp's file has %v", kv.Key, kv.Value, v)
						}
					}
				}
			})
		}
	}
}

// writeSynthFile writes the model that command-line style args ("--arch", "llama",
// "--tied", ...) describe, as `minfer synth` would, and returns its path.
func writeSynthFile(t *testing.T, args ...string) string {
	t.Helper()
	flags := map[string]string{}
	for i := 0; i < len(args); i++ {
		k := strings.TrimPrefix(args[i], "--")
		if k == "tied" || k == "fast" {
			flags[k] = "true"
			continue
		}
		if i+1 >= len(args) {
			t.Fatalf("BUG: test flag %q without a value", args[i])
		}
		flags[k] = args[i+1]
		i++
	}
	out := filepath.Join(t.TempDir(), "m.gguf")
	if _, err := Write(context.Background(), mustPlan(t, "", flags), out); err != nil {
		t.Fatalf("synth %v: %v", args, err)
	}
	return out
}

func famArgs(fam string) []string {
	var args []string
	for k, v := range synthFamilies[fam] {
		if k == "tied" {
			args = append(args, "--tied")
			continue
		}
		args = append(args, "--"+k, v)
	}
	return args
}

// TestSynthWritesLoadableModels writes each arch at each type (and --fast), then wants
// gguf to open it with the planned tensors (cmd/minfer's TestSynthThenInspect runs
// inspect on the same files), every dequantized
// value to be finite, and a rewrite through gguf.Writer to give the same bytes.
func TestSynthWritesLoadableModels(t *testing.T) {
	types := []string{"f32", "f16", "bf16", "q8_0", "q4_0", "q4_k", "q6_k", "q4_k_m", "q3_k_m", "q3_k_m",
		"iq4_nl", "iq4_nl", "iq4_xs", "iq4_xs", "mxfp4", "mxfp4", // each new type once plain, once --fast
		"iq3_s", "iq3_s", "iq3_xxs", "iq2_s", "iq2_xs", "iq2_xxs", "iq1_s", "iq1_m"} // the last six --fast only
	for _, fam := range []string{"llama", "qwen2", "qwen3"} {
		for i, typ := range types {
			fast := i%2 == 1 || typeTable[typ].fastOnly // half the types through --fast, covering its block layouts
			name := fam + "-" + typ
			if fast {
				name += "-fast"
			}
			t.Run(name, func(t *testing.T) {
				args := append(famArgs(fam), "--type", typ, "--n-vocab", "512", "--seed", "5")
				if fast {
					args = append(args, "--fast")
				}
				path := writeSynthFile(t, args...)
				checkSynthFile(t, path)
				fl := map[string]string{"type": typ, "n-vocab": "512"}
				if fast {
					fl["fast"] = "true"
				}
				for k, v := range synthFamilies[fam] {
					if k != "n-vocab" {
						fl[k] = v
					}
				}
				f, err := gguf.Open(path)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				got := map[string]tensorSpec{}
				for _, ti := range f.Tensors {
					got[ti.Name] = tensorSpec{ti.Type, ti.Dims}
				}
				compareSpecs(t, got, planSpecs(mustPlan(t, "", fl)))
			})
		}
	}
}

func checkSynthFile(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		vals := dequantAll(t, f, ti)
		for j, v := range vals {
			if math.IsNaN(float64(v)) || math.Abs(float64(v)) > 1000 {
				t.Fatalf("%s[%d] = %v, want finite and small", ti.Name, j, v)
			}
		}
	}
	w := gguf.NewWriter()
	for _, kv := range f.KVs {
		w.Set(kv.Key, kv.Value)
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		w.AddTensor(ti.Name, ti.Type, ti.Dims, f.TensorData(ti))
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), data) {
		t.Errorf("rewriting the synth file through gguf.Writer changed its bytes")
	}
}

// TestSynthSameSeedSameFloats: the F32 file of a seed holds the float weights; the F16
// file of that seed must hold exactly their f16 roundings, the Q8_0 file their Q8_0
// quantization (bit-exact, through quant.Quantize), and another seed other weights: the
// types share one set of floats. That synth's quantized bytes are llama-quantize's is
// TestSynthWeightsMatchLlamaQuantize's to check.
func TestSynthSameSeedSameFloats(t *testing.T) {
	args := append(famArgs("qwen3"), "--n-vocab", "300", "--seed", "9")
	f32, f16, q8 := openSynth(t, args, "f32"), openSynth(t, args, "f16"), openSynth(t, args, "q8_0")
	other := openSynth(t, append(famArgs("qwen3"), "--n-vocab", "300", "--seed", "10"), "f32")
	for i := range f32.Tensors {
		ref := &f32.Tensors[i]
		vals := dequantAll(t, f32, ref)
		for _, c := range []struct {
			f *gguf.File
		}{{f16}, {q8}} {
			ti, _ := c.f.Tensor(ref.Name)
			want := make([]byte, ti.Size)
			if err := quant.Quantize(ti.Type, want, vals); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(c.f.TensorData(ti), want) {
				t.Errorf("%s (%s): bytes are not the quantized f32 weights of the same seed", ti.Name, ti.Type)
			}
		}
		ot, _ := other.Tensor(ref.Name)
		if bytes.Equal(other.TensorData(ot), f32.TensorData(ref)) {
			t.Errorf("%s: seeds 9 and 10 gave the same weights", ref.Name)
		}
	}
}

func openSynth(t *testing.T, args []string, typ string) *gguf.File {
	t.Helper()
	path := writeSynthFile(t, append(args, "--type", typ)...)
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestSynthLogitSpread checks --init gaussian keeps logits spread: for the tied qwen2
// family, output_norm·token_embd rows give logits with a standard deviation near 3
// for a unit-RMS hidden state.
func TestSynthLogitSpread(t *testing.T) {
	f := openSynth(t, append(famArgs("qwen2"), "--n-vocab", "512", "--seed", "3", "--init", "gaussian"), "f32")
	emb, _ := f.Tensor("token_embd.weight")
	norm, _ := f.Tensor("output_norm.weight")
	e, g := dequantAll(t, f, emb), dequantAll(t, f, norm)
	n := int(emb.Dims[0])
	x := make([]float64, n) // a fixed unit-RMS hidden state: alternating ±1
	for i := range x {
		x[i] = float64(1 - 2*(i%2))
	}
	var sum, sq float64
	rows := int(emb.Dims[1])
	for r := range rows {
		var l float64
		for i := range n {
			l += x[i] * float64(g[i]) * float64(e[r*n+i])
		}
		sum += l
		sq += l * l
	}
	std := math.Sqrt(sq/float64(rows) - (sum/float64(rows))*(sum/float64(rows)))
	if std < 2 || std > 4.5 {
		t.Errorf("logit std = %.2f, want about 3", std)
	}
}

func TestSynthFastDeterministic(t *testing.T) {
	args := append(famArgs("llama"), "--n-vocab", "512", "--type", "q4_k_m", "--fast", "--seed", "4")
	a, _ := os.ReadFile(writeSynthFile(t, args...))
	b, _ := os.ReadFile(writeSynthFile(t, args...))
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Errorf("two --fast runs with one seed differ (%d, %d bytes)", len(a), len(b))
	}
}

func TestSynthCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r, err := Resolve(Options{Type: "f16", NLayer: 1, NVocab: 300}, "qwen2.5-0.5b", map[string]bool{"n-layer": true, "n-vocab": true})
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPlan(r)
	if err != nil {
		t.Fatal(err)
	}
	w, err := p.writer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteTo(io.Discard); err == nil || !strings.Contains(err.Error(), "canceled") {
		t.Errorf("WriteTo with a cancelled context: err = %v, want context canceled", err)
	}
}

// dequantAll decodes every value of tensor ti of f.
func dequantAll(t *testing.T, f *gguf.File, ti *gguf.TensorInfo) []float32 {
	t.Helper()
	out := make([]float32, ti.Elements())
	if err := quant.Dequantize(ti.Type, out, f.TensorData(ti)); err != nil {
		t.Fatalf("%s: %v", ti.Name, err)
	}
	return out
}

// TestSynthWeightsMatchLlamaQuantize: synth's weight writer (the plan's types, the
// row-by-row encoding of writeTo, its chunks and workers) given the float weights of
// the synthetic F16 models writes, tensor by tensor, the bytes llama-quantize wrote
// from them (no importance matrix): an independent reference for every type synth
// plans there, where TestSynthSameSeedSameFloats can only compare synth with
// quant.Quantize, the function it calls.
func TestSynthWeightsMatchLlamaQuantize(t *testing.T) {
	seen := map[quant.Type]int{}
	for _, fam := range []string{"llama", "qwen2", "qwen3"} {
		src, err := gguf.Open(testpath.Path(t, "models", "synthetic", "synth-"+fam+"-f16.gguf"))
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		for _, typ := range []string{"q8_0", "q4_0", "q4_k_m", "q6_k", "iq4_nl", "iq4_xs"} {
			dir := "models/synthetic"
			if strings.HasPrefix(typ, "iq") {
				if fam != "llama" {
					continue // the IQ4 quantizers are slow; quant's own test covers qwen3's
				}
				dir = "quant-types"
			}
			t.Run(fam+"-"+typ, func(t *testing.T) {
				ref, err := gguf.Open(testpath.Path(t, dir, "synth-"+fam+"-"+typ+".gguf"))
				if err != nil {
					t.Fatal(err)
				}
				defer ref.Close()
				fl := map[string]string{"type": typ}
				for k, v := range synthFamilies[fam] {
					fl[k] = v
				}
				p := mustPlan(t, "", fl)
				for _, pt := range p.Tensors {
					st, ok := src.Tensor(pt.Name)
					rt, ok2 := ref.Tensor(pt.Name)
					if !ok || !ok2 {
						t.Fatalf("%s: not in the reference files", pt.Name)
					}
					vals := dequantAll(t, src, st)
					row := int(pt.Dims[0])
					pt.Mean, pt.Std = 0, 0
					pt.Shape = func(r int, out []float32) { copy(out, vals[r*row:(r+1)*row]) }
					var got bytes.Buffer
					if err := newTensorGen(p.Opts.Seed, pt, false).writeTo(context.Background(), &got); err != nil {
						t.Fatalf("%s: %v", pt.Name, err)
					}
					if want := ref.TensorData(rt); !bytes.Equal(got.Bytes(), want) {
						diff := 0
						for i := range min(got.Len(), len(want)) {
							if got.Bytes()[i] != want[i] {
								diff++
							}
						}
						t.Errorf("%s (%s): %d bytes, %d of them differ from llama-quantize's %d", pt.Name, pt.Type, got.Len(), diff, len(want))
					}
					seen[pt.Type]++
				}
			})
		}
	}
	t.Logf("tensors compared per type: %v", seen)
	for _, typ := range []quant.Type{quant.F32, quant.Q8_0, quant.Q4_0, quant.Q4_K, quant.Q6_K, quant.IQ4_NL, quant.IQ4_XS} {
		if seen[typ] == 0 {
			t.Errorf("no %s tensor compared", typ)
		}
	}
}

// TestSynthFastOnlyTypes: a codebook type without --fast is refused with the reason.
func TestSynthFastOnlyTypes(t *testing.T) {
	for name, st := range typeTable {
		if !st.fastOnly {
			continue
		}
		o := Options{Arch: "llama", Type: name, NEmbd: 256, NLayer: 1, NHead: 8, NHeadKV: 4, NFF: 768, NVocab: 512}
		if _, err := NewPlan(o); err == nil || !strings.Contains(err.Error(), "needs --fast") {
			t.Errorf("--type %s without --fast: got %v, want a \"needs --fast\" error", name, err)
		}
	}
}

// TestWriteProgress: the progress callback sees the bytes written grow to the plan's
// tensor data, ending at it.
func TestWriteProgress(t *testing.T) {
	p := mustPlan(t, "", map[string]string{"arch": "llama", "n-embd": "256", "n-layer": "2", "n-head": "8", "n-ff": "768",
		"n-vocab": "512", "type": "f16", "fast": "true"})
	var calls, last, total int64
	_, err := WriteProgress(context.Background(), p, filepath.Join(t.TempDir(), "m.gguf"), func(done, tot int64) {
		if done < last {
			t.Errorf("progress went back from %d to %d", last, done)
		}
		calls, last, total = calls+1, done, tot
	})
	if err != nil {
		t.Fatal(err)
	}
	var want int64
	for _, tn := range p.Tensors {
		want += int64(tn.Bytes())
	}
	if calls < 3 || last != want || total != want {
		t.Errorf("got %d calls ending at %d of %d, want several ending at the tensor data, %d", calls, last, total, want)
	}
}
