package model

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/gguf"
)

// Params are a model's hyperparameters, read from GGUF metadata (keys
// "<arch>.embedding_length" and friends, as llama.cpp names them).
type Params struct {
	Arch     string
	Vocab    int // rows of token_embd
	Embd     int // n_embd: width of the residual stream
	Layers   int
	Heads    int
	KVHeads  int
	HeadDim  int // key/value length per head (may differ from Embd/Heads: qwen3)
	FF       int // n_ff: hidden width of the feed-forward block
	CtxTrain int // "<arch>.context_length"
	RMSEps   float32
	Rope     backend.RoPE // FreqFactors filled by the loader from rope_freqs.weight
	Attn     backend.Attn
	// TiedOutput: the classifier reuses token_embd (no output.weight in the file).
	TiedOutput bool
}

// QDim is the width of the query projection (Heads × HeadDim).
func (p *Params) QDim() int { return p.Heads * p.HeadDim }

// KVDim is the width of the key and value projections (KVHeads × HeadDim).
func (p *Params) KVDim() int { return p.KVHeads * p.HeadDim }

// meta reads typed metadata of one architecture, remembering the first error so
// readParams stays a flat list of keys.
type meta struct {
	f    *gguf.File
	arch string
	err  error
}

func (m *meta) key(k string) string { return m.arch + "." + k }

func (m *meta) fail(k string, err error) {
	if m.err == nil {
		m.err = fmt.Errorf("model: metadata key %q: %w", m.key(k), err)
	}
}

// uint reads a required (def < 0) or optional positive integer.
func (m *meta) uint(k string, def int) int {
	v, err := m.f.GetUint(m.key(k))
	if errors.Is(err, gguf.ErrNotFound) && def >= 0 {
		return def
	}
	if err != nil {
		m.fail(k, err)
		return 0
	}
	if v == 0 || v > math.MaxInt32 {
		m.fail(k, fmt.Errorf("value %d out of range", v))
		return 0
	}
	return int(v)
}

func (m *meta) float(k string, def float64) float32 {
	v, err := m.f.GetFloat(m.key(k))
	if errors.Is(err, gguf.ErrNotFound) {
		return float32(def)
	}
	if err != nil {
		m.fail(k, err)
	}
	return float32(v)
}

// floatIn is float with the value checked to be finite and in [lo, hi]: an absurd
// hyperparameter (rope base 1e-30, rms epsilon 1e38, a scale of inf) loads and then
// generates garbage, so it is refused naming the key.
func (m *meta) floatIn(k string, def, lo, hi float64) float32 {
	v := m.float(k, def)
	if f := float64(v); math.IsNaN(f) || math.IsInf(f, 0) || f < lo || f > hi {
		m.fail(k, fmt.Errorf("value %g outside [%g, %g]", v, lo, hi))
	}
	return v
}

// Ranges of the float hyperparameters, wide around every model published: rms
// epsilon is 1e-6 or 1e-5 (1e-12 in some encoders), the rope base 1e4 to 1e8, a
// linear rope factor 2 to 64.
const (
	minRMSEps, maxRMSEps     = 1e-12, 0.1
	minRopeBase, maxRopeBase = 1, 1e12
	maxRopeFactor            = 1024
)

// readParams reads the hyperparameters of f for an architecture with rope mode rm.
// vocab comes from the token_embd tensor (checked against "<arch>.vocab_size" when set).
func readParams(f *gguf.File, arch string, rm backend.RoPEMode) (Params, error) {
	m := &meta{f: f, arch: arch}
	p := Params{Arch: arch}
	p.Embd = m.uint("embedding_length", -1)
	p.Layers = m.uint("block_count", -1)
	p.Heads = m.uint("attention.head_count", -1)
	p.KVHeads = m.uint("attention.head_count_kv", p.Heads)
	p.FF = m.uint("feed_forward_length", -1)
	p.CtxTrain = m.uint("context_length", 2048)
	p.RMSEps = m.floatIn("attention.layer_norm_rms_epsilon", 1e-5, minRMSEps, maxRMSEps)
	if m.err != nil {
		return p, m.err
	}
	if p.Heads > 0 && p.Embd%p.Heads != 0 && !f.Has(m.key("attention.key_length")) {
		return p, fmt.Errorf("model: embedding_length %d not divisible by head_count %d", p.Embd, p.Heads)
	}
	p.HeadDim = m.uint("attention.key_length", p.Embd/max(p.Heads, 1))
	if vl := m.uint("attention.value_length", p.HeadDim); vl != p.HeadDim && m.err == nil {
		return p, fmt.Errorf("model: %s value_length %d != key_length %d is not supported", arch, vl, p.HeadDim)
	}
	ropeDims := m.uint("rope.dimension_count", p.HeadDim)
	base := m.floatIn("rope.freq_base", 10000, minRopeBase, maxRopeBase)
	scale, err := ropeScale(m)
	if m.err != nil {
		return p, m.err
	}
	if err != nil {
		return p, err
	}
	switch {
	case p.KVHeads > p.Heads || p.Heads%p.KVHeads != 0:
		return p, fmt.Errorf("model: head_count %d is not a multiple of head_count_kv %d", p.Heads, p.KVHeads)
	case ropeDims != p.HeadDim:
		return p, fmt.Errorf("model: partial rotary embedding (rope.dimension_count %d, head size %d) is not supported", ropeDims, p.HeadDim)
	case p.HeadDim%2 != 0:
		return p, fmt.Errorf("model: odd head size %d", p.HeadDim)
	case !(p.RMSEps > 0) || !(base > 0):
		return p, fmt.Errorf("model: invalid rms epsilon %g or rope base %g", p.RMSEps, base)
	}
	p.Rope = backend.RoPE{Mode: rm, Dims: ropeDims, Base: base, FreqScale: scale}
	p.Attn = backend.Attn{Heads: p.Heads, KVHeads: p.KVHeads, HeadDim: p.HeadDim,
		Scale: float32(1 / math.Sqrt(float64(p.HeadDim)))}
	return p, nil
}

// ropeScale returns the linear frequency scale from "rope.scaling.type"/"factor" (or
// the older "rope.scale_linear"). llama3's per-dimension factors come from the
// rope_freqs.weight tensor instead and need no key here.
func ropeScale(m *meta) (float32, error) {
	typ, err := m.f.GetString(m.key("rope.scaling.type"))
	if err != nil && !errors.Is(err, gguf.ErrNotFound) {
		return 1, fmt.Errorf("model: metadata key %q: %w", m.key("rope.scaling.type"), err)
	}
	factor := m.floatIn("rope.scaling.factor", 0, 0, maxRopeFactor)
	if factor == 0 {
		factor = m.floatIn("rope.scale_linear", 0, 0, maxRopeFactor)
	}
	switch strings.ToLower(typ) {
	case "", "none":
		if typ == "" && factor > 0 { // scale_linear alone means linear
			return 1 / factor, nil
		}
		return 1, nil
	case "linear":
		if !(factor > 0) {
			return 1, nil
		}
		return 1 / factor, nil
	case "llama3":
		return 1, nil
	}
	return 1, fmt.Errorf("model: rope scaling type %q is not supported (none, linear, llama3)", typ)
}
