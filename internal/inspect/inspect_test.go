package inspect

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"math"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/minfer/minfer/core/gguf"
	"github.com/minfer/minfer/core/quant"
	"github.com/minfer/minfer/internal/testpath"
)

func allTestGGUFs(t *testing.T) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(testpath.Dir(t), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".gguf") {
			out = append(out, p)
		}
		return err
	})
	if len(out) < 30 {
		t.Fatalf("found %d .gguf files, want ≥ 30", len(out))
	}
	return out
}

func TestInspectEveryTestFile(t *testing.T) {
	for _, p := range allTestGGUFs(t) {
		name, _ := filepath.Rel(testpath.Dir(t), p)
		t.Run(name, func(t *testing.T) {
			f, err := gguf.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			text, _, err := runInspect(t, p)
			if err != nil {
				t.Fatalf("inspect: %v", err)
			}
			for _, want := range []string{"architecture  " + f.Arch(), "metadata (", "tokenizer.ggml.tokens"} {
				if !strings.Contains(text, want) {
					t.Errorf("text output lacks %q", want)
				}
			}
			if len(f.Tensors) > 0 && !strings.Contains(text, f.Tensors[0].Name) {
				t.Errorf("text output lacks tensor %q", f.Tensors[0].Name)
			}
			out, _, err := runInspect(t, "--json", p)
			if err != nil {
				t.Fatalf("inspect --json: %v", err)
			}
			var got Summary
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("--json output does not decode: %v", err)
			}
			if got.Architecture != f.Arch() || len(got.Metadata) != len(f.KVs) || len(got.Tensors) != len(f.Tensors) {
				t.Errorf("json: arch %q, %d keys, %d tensors; want %q, %d, %d",
					got.Architecture, len(got.Metadata), len(got.Tensors), f.Arch(), len(f.KVs), len(f.Tensors))
			}
			var params, bytes uint64
			for i := range f.Tensors {
				params += f.Tensors[i].Elements()
				bytes += f.Tensors[i].Size
			}
			if got.Totals.Params != params || got.Totals.Bytes != bytes {
				t.Errorf("totals %d params %d bytes, want %d, %d", got.Totals.Params, got.Totals.Bytes, params, bytes)
			}
			for _, kv := range got.Metadata {
				if kv.Key == "tokenizer.ggml.tokens" {
					n := *kv.Count
					items := kv.Value.([]any)
					if n < 500 || !kv.Truncated || len(items) != 8 {
						t.Errorf("tokens summary: count %d, truncated %v, %d items; want ≥ 500, true, 8", n, kv.Truncated, len(items))
					}
				}
			}
		})
	}
}

func TestInspectFileTypeLabel(t *testing.T) {
	tests := []struct{ file, want string }{
		{"synth-llama-f16.gguf", "F16 (1)"},
		{"synth-llama-q8_0.gguf", "Q8_0 (7)"},
		{"synth-qwen2-q4_0.gguf", "Q4_0 (2)"},
		{"synth-qwen3-q4_k_m.gguf", "Q4_K_M (15)"},
		{"synth-qwen2-q6_k.gguf", "Q6_K (18)"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			out, _, err := runInspect(t, testpath.Path(t, "models", "synthetic", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, "file type     "+tt.want+"\n") {
				t.Errorf("output lacks file type %q:\n%s", tt.want, out[:min(len(out), 400)])
			}
		})
	}
}

// errBound is the largest |dequant(quant(x)) - x| llama.cpp's reference quantizer can
// leave in a block of the given type, as a multiple of the block's max |x| (amax; for
// the K-quants the 256-value super-block's). d is the block scale, stored as f16
// (relative rounding error ≤ 2^-11).
//
//   - Q8_0: d = amax/127, q = round(x/d) ≤ 127: half a step plus 127 times the f16
//     error of d: (1/2 + 127·2^-11)/127.
//   - Q4_0: d = max/-8, q = round(x/d)+8 clamped to 15: the value at -max lands on 7·d,
//     one full step off, plus 8·2^-11 steps of f16 error: (1 + 8·2^-11)/8.
//   - Q5_0: the same with 16 levels each side: (1 + 16·2^-11)/16.
//   - Q4_K: a 4-bit asymmetric code per 32 values, spanning at most 2·amax; the scale
//     and min are themselves quantized to 6 bits, which can cost up to a further half
//     step: one step, 2/15.
//   - Q6_K: a 6-bit symmetric code (−32…31) per 16 values with 8-bit scales: one step,
//     1/32.
var errBound = map[quant.Type]float64{
	quant.Q8_0: (0.5 + 127.0/2048) / 127,
	quant.Q4_0: (1 + 8.0/2048) / 8,
	quant.Q5_0: (1 + 16.0/2048) / 16,
	quant.Q4_K: 2.0 / 15,
	quant.Q6_K: 1.0 / 32,
}

func dequantAll(t *testing.T, f *gguf.File, ti *gguf.TensorInfo) []float32 {
	t.Helper()
	var out []float32
	if err := DequantRows(context.Background(), f, ti, func(r []float32) error { out = append(out, r...); return nil }); err != nil {
		t.Fatal(err)
	}
	if uint64(len(out)) != ti.Elements() {
		t.Fatalf("%s: %d values, want %d", ti.Name, len(out), ti.Elements())
	}
	return out
}

// TestDequantAgainstF16 dequantizes every tensor of every quantized synthetic model and
// compares it with the same tensor of the F16 model it was quantized from, block by
// block, within errBound. The smallest tensor of each type in each file also goes through the CLI
// (--tensor --dequant --json), which must print the same values.
func TestDequantAgainstF16(t *testing.T) {
	seen := map[quant.Type]bool{}
	for _, fam := range []string{"llama", "qwen2", "qwen3"} {
		ref, err := gguf.Open(testpath.Path(t, "models", "synthetic", "synth-"+fam+"-f16.gguf"))
		if err != nil {
			t.Fatal(err)
		}
		defer ref.Close()
		for _, q := range []string{"q8_0", "q4_0", "q4_k_m", "q6_k"} {
			path := testpath.Path(t, "models", "synthetic", "synth-"+fam+"-"+q+".gguf")
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			smallest := map[quant.Type]*gguf.TensorInfo{} // per type, for the CLI check
			vals := map[*gguf.TensorInfo][]float32{}
			for i := range f.Tensors {
				ti := &f.Tensors[i]
				rt, ok := ref.Tensor(ti.Name)
				if !ok || !reflect.DeepEqual(rt.Dims, ti.Dims) {
					t.Fatalf("%s: %s missing from the F16 file or shaped differently", path, ti.Name)
				}
				got, want := dequantAll(t, f, ti), dequantAll(t, ref, rt)
				seen[ti.Type] = true
				checkBlocks(t, fam+"-"+q+"/"+ti.Name, ti.Type, got, want)
				if s := smallest[ti.Type]; s == nil || ti.Size < s.Size {
					smallest[ti.Type] = ti
					vals[ti] = got
				}
			}
			for _, ti := range smallest {
				checkCLIDequant(t, path, ti, vals[ti])
			}
		}
	}
	for typ := range errBound {
		if !seen[typ] {
			t.Errorf("no tensor of type %s was checked", typ)
		}
	}
}

func checkBlocks(t *testing.T, name string, typ quant.Type, got, want []float32) {
	t.Helper()
	if typ == quant.F32 || typ == quant.F16 {
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s (%s): values differ from the F16 file's", name, typ)
		}
		return
	}
	bound, ok := errBound[typ]
	if !ok {
		t.Fatalf("%s: no error bound for %s", name, typ)
	}
	bs := typ.BlockSize()
	for s := 0; s < len(got); s += bs {
		amax, worst := 0.0, 0.0
		for j := s; j < s+bs; j++ {
			amax = math.Max(amax, math.Abs(float64(want[j])))
			worst = math.Max(worst, math.Abs(float64(got[j]-want[j])))
		}
		if worst > bound*amax {
			t.Errorf("%s (%s): block at %d: max abs err %g > %.5f·amax (amax %g)", name, typ, s, worst, bound, amax)
			return
		}
	}
}

func checkCLIDequant(t *testing.T, path string, ti *gguf.TensorInfo, want []float32) {
	t.Helper()
	out, _, err := runInspect(t, path, "--tensor", ti.Name, "--dequant", "--json")
	if err != nil {
		t.Fatalf("inspect --tensor %s --dequant --json: %v", ti.Name, err)
	}
	var got struct {
		Name   string    `json:"name"`
		Type   string    `json:"type"`
		Shape  []uint64  `json:"shape"`
		Values []float32 `json:"values"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%s: JSON: %v", ti.Name, err)
	}
	if got.Name != ti.Name || got.Type != ti.Type.String() || !reflect.DeepEqual(got.Shape, ti.Dims) {
		t.Errorf("CLI header %q %q %v, want %q %q %v", got.Name, got.Type, got.Shape, ti.Name, ti.Type, ti.Dims)
	}
	if !reflect.DeepEqual(got.Values, want) {
		t.Errorf("%s: CLI values differ from DequantRows (%d vs %d values)", ti.Name, len(got.Values), len(want))
	}
}

func TestInspectTensorText(t *testing.T) {
	p := testpath.Path(t, "models", "synthetic", "synth-qwen2-f16.gguf")
	f, err := gguf.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ti, _ := f.Tensor("blk.0.attn_k.bias")
	vals := dequantAll(t, f, ti)
	out, _, err := runInspect(t, p, "--tensor", "blk.0.attn_k.bias", "--dequant")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"type   F32\n", "shape  64\n", "stats  min ", "  [8] ", "  [56] "} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(out, "  [0] "+strconv.FormatFloat(float64(vals[0]), 'g', 7, 32)) {
		t.Errorf("output lacks the first value %v:\n%s", vals[0], out)
	}
	info, _, err := runInspect(t, p, "--tensor", "token_embd.weight", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var tj TensorJSON
	if err := json.Unmarshal([]byte(info), &tj); err != nil || tj.Type != "F16" || tj.Params != 256*2048 || tj.Bytes != 256*2048*2 {
		t.Errorf("--tensor --json = %+v (%v), want F16, 524288 params, 1048576 bytes", tj, err)
	}
}

// runInspect runs Write as minfer inspect ARGS does: a path and --json, --tensor NAME,
// --dequant (the flag parsing itself is cmd/minfer's, tested there).
func runInspect(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	o := Options{Items: 8}
	var path string
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "--json":
			o.JSON = true
		case "--dequant":
			o.Dequant = true
		case "--tensor":
			i++
			o.Tensor = args[i]
		default:
			path = args[i]
		}
	}
	f, err := gguf.Open(path)
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	var out bytes.Buffer
	err = Write(context.Background(), &out, path, f, o)
	return out.String(), "", err
}
