package model

import (
	"fmt"
	"slices"
	"strings"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/gguf"
	"github.com/minfer/minfer/core/quant"
)

// tensorSpec names one tensor an architecture reads, its shape in ggml order
// (dims[0] is the row length) and where the loaded weight goes.
type tensorSpec struct {
	name     string
	dims     []int // [cols] for a vector, [cols, rows] for a matrix
	optional bool
	dst      *backend.Weight
}

// Layer holds one transformer block's weights. Fields an architecture does not use (or
// an optional tensor absent from the file) are nil.
type Layer struct {
	AttnNorm     backend.Weight // (embd)
	Wq, Wk, Wv   backend.Weight // (qdim, embd), (kvdim, embd), (kvdim, embd)
	Bq, Bk, Bv   backend.Weight // (qdim), (kvdim), (kvdim): qwen2 biases
	QNorm, KNorm backend.Weight // (head_dim): qwen3 per-head norms
	Wo           backend.Weight // (embd, qdim)
	FFNNorm      backend.Weight // (embd)
	Gate, Up     backend.Weight // (ff, embd)
	Down         backend.Weight // (embd, ff)
}

// Weights are all of a model's tensors on the backend.
type Weights struct {
	TokEmbd  backend.Weight // (vocab, embd)
	OutNorm  backend.Weight // (embd)
	Output   backend.Weight // (vocab, embd); == TokEmbd when tied
	RopeFreq backend.Weight // (head_dim/2) llama3 frequency factors, or nil
	Layers   []Layer
}

// vec and mat build specs; blk builds a per-layer tensor name.
func vec(name string, n int, dst *backend.Weight) tensorSpec {
	return tensorSpec{name: name, dims: []int{n}, dst: dst}
}

func mat(name string, cols, rows int, dst *backend.Weight) tensorSpec {
	return tensorSpec{name: name, dims: []int{cols, rows}, dst: dst}
}

func opt(s tensorSpec) tensorSpec { s.optional = true; return s }

func blk(l int, name string) string { return fmt.Sprintf("blk.%d.%s", l, name) }

// commonSpecs lists the tensors every supported architecture has (llama layout).
func commonSpecs(p *Params, w *Weights) []tensorSpec {
	s := []tensorSpec{
		mat("token_embd.weight", p.Embd, p.Vocab, &w.TokEmbd),
		vec("output_norm.weight", p.Embd, &w.OutNorm),
		opt(mat("output.weight", p.Embd, p.Vocab, &w.Output)),
	}
	for l := range w.Layers {
		L := &w.Layers[l]
		s = append(s,
			vec(blk(l, "attn_norm.weight"), p.Embd, &L.AttnNorm),
			mat(blk(l, "attn_q.weight"), p.Embd, p.QDim(), &L.Wq),
			mat(blk(l, "attn_k.weight"), p.Embd, p.KVDim(), &L.Wk),
			mat(blk(l, "attn_v.weight"), p.Embd, p.KVDim(), &L.Wv),
			mat(blk(l, "attn_output.weight"), p.QDim(), p.Embd, &L.Wo),
			vec(blk(l, "ffn_norm.weight"), p.Embd, &L.FFNNorm),
			mat(blk(l, "ffn_gate.weight"), p.Embd, p.FF, &L.Gate),
			mat(blk(l, "ffn_up.weight"), p.Embd, p.FF, &L.Up),
			mat(blk(l, "ffn_down.weight"), p.FF, p.Embd, &L.Down),
		)
	}
	return s
}

// biasSpecs lists the q/k/v biases (required for qwen2, optional for llama).
func biasSpecs(p *Params, w *Weights, optional bool) []tensorSpec {
	var s []tensorSpec
	for l := range w.Layers {
		L := &w.Layers[l]
		for _, b := range []tensorSpec{
			vec(blk(l, "attn_q.bias"), p.QDim(), &L.Bq),
			vec(blk(l, "attn_k.bias"), p.KVDim(), &L.Bk),
			vec(blk(l, "attn_v.bias"), p.KVDim(), &L.Bv),
		} {
			b.optional = optional
			s = append(s, b)
		}
	}
	return s
}

// qkNormSpecs lists qwen3's per-head q/k norms.
func qkNormSpecs(p *Params, w *Weights) []tensorSpec {
	var s []tensorSpec
	for l := range w.Layers {
		L := &w.Layers[l]
		s = append(s,
			vec(blk(l, "attn_q_norm.weight"), p.HeadDim, &L.QNorm),
			vec(blk(l, "attn_k_norm.weight"), p.HeadDim, &L.KNorm))
	}
	return s
}

// loadWeights checks every spec against the file (all problems at once: missing
// tensors listed by name, then wrong shapes or types) and creates the backend weights
// under the namespace ns ("target/blk.0.attn_q.weight"). On error nothing stays
// allocated. progress, if non-nil, is called with the bytes loaded so far.
func loadWeights(b backend.Backend, f *gguf.File, ns string, specs []tensorSpec, progress func(done, total int64)) (int64, error) {
	var missing, bad []string
	var total int64
	infos := make([]*gguf.TensorInfo, len(specs))
	for i, s := range specs {
		ti, ok := f.Tensor(s.name)
		if !ok {
			if !s.optional {
				missing = append(missing, s.name)
			}
			continue
		}
		if err := checkTensor(ti, s); err != nil {
			bad = append(bad, err.Error())
			continue
		}
		infos[i] = ti
		total += int64(ti.Size)
	}
	if len(missing) > 0 {
		return 0, fmt.Errorf("model: %d required tensor(s) missing: %s", len(missing), strings.Join(missing, ", "))
	}
	if len(bad) > 0 {
		return 0, fmt.Errorf("model: %s", strings.Join(bad, "; "))
	}
	var made []backend.Weight
	var done int64
	for i, s := range specs {
		ti := infos[i]
		if ti == nil {
			continue
		}
		rows := 1
		if len(s.dims) == 2 {
			rows = s.dims[1]
		}
		data := f.TensorData(ti)
		if uint64(len(data)) != ti.Size {
			freeAll(b, made)
			return 0, fmt.Errorf("model: tensor %q: data outside the file", s.name)
		}
		w, err := b.NewWeight(ns+"/"+s.name, ti.Type, rows, s.dims[0], data)
		if err != nil {
			freeAll(b, made)
			return 0, fmt.Errorf("model: tensor %q: %w", s.name, err)
		}
		made = append(made, w)
		*s.dst = w
		done += int64(ti.Size)
		if progress != nil {
			progress(done, total)
		}
	}
	return total, nil
}

func freeAll(b backend.Backend, ws []backend.Weight) {
	for _, w := range ws {
		b.Free(w)
	}
}

// checkTensor compares a tensor's shape and type with its spec.
func checkTensor(ti *gguf.TensorInfo, s tensorSpec) error {
	want := make([]uint64, len(s.dims))
	for i, d := range s.dims {
		want[i] = uint64(d)
	}
	dims := slices.Clone(ti.Dims)
	for len(dims) > len(want) && dims[len(dims)-1] == 1 {
		dims = dims[:len(dims)-1] // trailing 1s are the same shape
	}
	if !slices.Equal(dims, want) {
		return fmt.Errorf("tensor %q: shape %v, want %v", s.name, ti.Dims, want)
	}
	tr, ok := ti.Type.Lookup()
	switch {
	case !ok:
		return fmt.Errorf("tensor %q: unknown type %d", s.name, uint32(ti.Type))
	case len(s.dims) == 1 && ti.Type != quant.F32:
		return fmt.Errorf("tensor %q: type %s, want F32 for a vector", s.name, ti.Type)
	case tr.Dequant == nil:
		return fmt.Errorf("tensor %q: type %s is not supported", s.name, ti.Type)
	}
	return nil
}
