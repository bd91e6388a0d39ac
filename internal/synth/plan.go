package synth

import (
	"context"
	"fmt"
	"io"
	"math"
	"sort"

	"github.com/minfer/minfer/core/gguf"
	"github.com/minfer/minfer/core/quant"
)

// synthType is one --type: every 2-D tensor of base (like llama-quantize --pure), or
// llama-quantize's Q4_K_M mixture when mix is set (Q3_K_M's when mixQ3 is set too);
// outQ6K gives the output (or the tied embedding) Q6_K as llama-quantize does for the
// IQ4 types. ftype is general.file_type (llama_ftype).
type typeSpec struct {
	base   quant.Type
	mix    bool
	mixQ3  bool
	outQ6K bool
	ftype  uint32
	// fastOnly: minfer has no quantizer for base (llama-quantize needs an importance
	// matrix for it), so only --fast (random valid blocks) can write it.
	fastOnly bool
}

var typeTable = map[string]typeSpec{
	"f32":    {base: quant.F32, ftype: 0},
	"f16":    {base: quant.F16, ftype: 1},
	"bf16":   {base: quant.BF16, ftype: 32},
	"q8_0":   {base: quant.Q8_0, ftype: 7},
	"q4_0":   {base: quant.Q4_0, ftype: 2},
	"q4_k":   {base: quant.Q4_K, ftype: 14}, // all Q4_K: llama.cpp's nearest label is Q4_K_S
	"q6_k":   {base: quant.Q6_K, ftype: 18},
	"q4_k_m": {base: quant.Q4_K, mix: true, ftype: 15},
	"q3_k_m": {base: quant.Q3_K, mix: true, mixQ3: true, ftype: 12},
	"iq4_nl": {base: quant.IQ4_NL, outQ6K: true, ftype: 25},
	"iq4_xs": {base: quant.IQ4_XS, outQ6K: true, ftype: 30},
	"mxfp4":  {base: quant.MXFP4, ftype: 38}, // all MXFP4 (llama.cpp's MXFP4_MOE keeps it for experts)
	"iq3_s":  {base: quant.IQ3_S, outQ6K: true, ftype: 26},
	// The codebook types llama-quantize needs an importance matrix for: that type, Q6_K
	// for output; --fast only (no quantizer).
	"iq3_xxs": {base: quant.IQ3_XXS, outQ6K: true, ftype: 23, fastOnly: true},
	"iq2_s":   {base: quant.IQ2_S, outQ6K: true, ftype: 28, fastOnly: true},
	"iq2_xs":  {base: quant.IQ2_XS, outQ6K: true, ftype: 20, fastOnly: true},
	"iq2_xxs": {base: quant.IQ2_XXS, outQ6K: true, ftype: 19, fastOnly: true},
	"iq1_s":   {base: quant.IQ1_S, outQ6K: true, ftype: 24, fastOnly: true},
	"iq1_m":   {base: quant.IQ1_M, outQ6K: true, ftype: 31, fastOnly: true},
}

func TypeNames() []string {
	names := make([]string, 0, len(typeTable))
	for n := range typeTable {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// useMoreBits is llama-quantize's choice of the layers whose attn_v and ffn_down get
// Q6_K in Q4_K_M: the first and last eighth, and every third layer between.
func useMoreBits(layer, nLayer int) bool {
	return layer < nLayer/8 || layer >= 7*nLayer/8 || (layer-nLayer/8)%3 == 2
}

// role is what a tensor is, for type selection and initialisation.
type role int

const (
	roleNorm role = iota // 1-D, F32
	roleBias             // 1-D, F32
	roleTokenEmbd
	roleOutput
	roleAttnV
	roleAttnOut
	roleFFNDown
	roleMatrix // any other 2-D weight
)

// tensorType picks the type of a 2-D tensor of role r in layer (of nLayer) whose rows
// have ne0 values, as llama-quantize does for this --type (llama_tensor_get_type).
func (st typeSpec) tensorType(r role, layer, nLayer int, ne0 uint64, tied bool) quant.Type {
	t := st.base
	if st.outQ6K && (r == roleOutput || r == roleTokenEmbd && tied) {
		t = quant.Q6_K
	}
	if st.mix {
		switch {
		case r == roleOutput || (r == roleTokenEmbd && tied):
			// The output (or the embedding that doubles as it) gets Q6_K, or Q8_0 when
			// its rows do not fit the K-quant block.
			if ne0%uint64(t.BlockSize()) != 0 {
				t = quant.Q8_0
			} else {
				t = quant.Q6_K
			}
		case st.mixQ3 && r == roleAttnV: // llama-quantize counts attn_v tensors: one a layer
			t = quant.Q4_K
			if layer < 2 {
				t = quant.Q5_K
			}
		case st.mixQ3 && r == roleFFNDown: // (Q3_K only where use_more_bits fails, on Falcon)
			t = quant.Q4_K
			if layer < nLayer/16 {
				t = quant.Q5_K
			}
		case st.mixQ3 && r == roleAttnOut:
			t = quant.Q4_K
		case !st.mixQ3 && (r == roleAttnV || r == roleFFNDown) && useMoreBits(layer, nLayer):
			t = quant.Q6_K
		}
	}
	return typeFallback(t, ne0)
}

// typeFallback is llama-quantize's tensor_type_fallback: a row length that is not a
// multiple of the block size moves Q4_K to Q5_0, Q5_K to Q5_1, Q6_K to Q8_0 and Q2_K,
// Q3_K, IQ4_XS and the codebook types to IQ4_NL, and anything still incompatible to F16. (llama-quantize refuses Q8_0/Q4_0 there; F16 keeps synth usable.)
func typeFallback(t quant.Type, ne0 uint64) quant.Type {
	if ne0%uint64(t.BlockSize()) == 0 {
		return t
	}
	switch t {
	case quant.Q4_K:
		t = quant.Q5_0
	case quant.Q5_K:
		t = quant.Q5_1
	case quant.Q6_K:
		t = quant.Q8_0
	case quant.Q2_K, quant.Q3_K, quant.IQ4_XS, quant.IQ3_S, quant.IQ3_XXS, quant.IQ2_S, quant.IQ2_XS, quant.IQ2_XXS, quant.IQ1_S, quant.IQ1_M:
		t = quant.IQ4_NL
	}
	if ne0%uint64(t.BlockSize()) != 0 {
		t = quant.F16
	}
	return t
}

// Tensor is one tensor of the plan with its initial distribution N(Mean, Std).
type Tensor struct {
	Name string
	Type quant.Type
	Dims []uint64 // ggml order: Dims[0] is the row length (input features)
	Mean float64
	Std  float64
	// Shape, when set, rewrites row r after it is drawn (--init lm's structure).
	Shape func(r int, row []float32)
}

// Plan is everything about a synthetic model but its weight bytes.
type Plan struct {
	Opts    Options
	KVs     []gguf.KV
	Tensors []Tensor
	lm      *backbone // --init lm's structure, nil for gaussian
}

// Params is the number of weights (elements of every tensor).
func (p *Plan) Params() uint64 {
	var n uint64
	for _, t := range p.Tensors {
		e := uint64(1)
		for _, d := range t.Dims {
			e *= d
		}
		n += e
	}
	return n
}

// NewPlan resolves the vocabulary and lists the tensors (names, types, shapes,
// distributions) and metadata of the model o describes, without generating weights.
func NewPlan(o Options) (*Plan, error) {
	st, ok := typeTable[o.Type]
	if !ok {
		return nil, fmt.Errorf("synth: unknown type %q", o.Type)
	}
	if st.fastOnly && !o.Fast {
		return nil, fmt.Errorf("synth: --type %s needs --fast: minfer has no %s quantizer (llama-quantize needs an importance matrix for it); --fast writes random valid blocks", o.Type, o.Type)
	}
	voc, err := loadVocab(o)
	if err != nil {
		return nil, err
	}
	switch {
	case o.NVocab == 0 || voc.n == o.NVocab:
		o.NVocab = voc.n
	case voc.n > o.NVocab && o.nVocabExplicit:
		return nil, fmt.Errorf("synth: vocabulary %s has %d tokens, more than --n-vocab %d", o.Vocab, voc.n, o.NVocab)
	case voc.n > o.NVocab:
		o.NVocab = voc.n
	default:
		voc.pad(o.NVocab)
	}
	var lm *backbone
	if o.Init == "lm" {
		if lm, err = newBackbone(o, tokenTypes(voc.kvs)); err != nil {
			return nil, err
		}
	}
	p := &Plan{Opts: o, lm: lm}
	p.Tensors = planTensors(o, st, lm)
	p.KVs = append(modelKVs(o, st), voc.kvs...)
	return p, nil
}

// planTensors lists the tensors; with lm, the distributions and row shapes of --init lm.
func planTensors(o Options, st typeSpec, lm *backbone) []Tensor {
	E, F, V := uint64(o.NEmbd), uint64(o.NFF), uint64(o.NVocab)
	Q, KV := uint64(o.NHead*o.HeadDim), uint64(o.NHeadKV*o.HeadDim)
	D := uint64(o.HeadDim)
	sq := func(n uint64) float64 { return 1 / math.Sqrt(float64(n)) }
	var ts []Tensor
	add := func(name string, r role, layer int, mean, std float64, dims ...uint64) int {
		t := quant.F32
		if r != roleNorm && r != roleBias {
			t = st.tensorType(r, layer, o.NLayer, dims[0], o.Tied)
		}
		ts = append(ts, Tensor{Name: name, Type: t, Dims: dims, Mean: mean, Std: std})
		return len(ts) - 1
	}
	// shape gives tensor i a row shape under --init lm.
	shape := func(i int, f func(int, []float32)) {
		if lm != nil {
			ts[i].Shape = f
		}
	}
	embStd := 1.0
	switch {
	case lm != nil:
		embStd = lm.nu
	case o.Tied:
		embStd = 0.02
	}
	emb := add("token_embd.weight", roleTokenEmbd, 0, 0, embStd, E, V)
	if lm != nil {
		ts[emb].Shape = lm.tokenRow
	}
	for i := range o.NLayer {
		b := fmt.Sprintf("blk.%d.", i)
		add(b+"attn_norm.weight", roleNorm, i, 1, 0.1, E)
		add(b+"attn_q.weight", roleMatrix, i, 0, sq(E), E, Q)
		if o.Arch == "qwen2" {
			add(b+"attn_q.bias", roleBias, i, 0, 0.2, Q)
		}
		add(b+"attn_k.weight", roleMatrix, i, 0, sq(E), E, KV)
		if o.Arch == "qwen2" {
			add(b+"attn_k.bias", roleBias, i, 0, 0.2, KV)
		}
		add(b+"attn_v.weight", roleAttnV, i, 0, sq(E), E, KV)
		if o.Arch == "qwen2" {
			add(b+"attn_v.bias", roleBias, i, 0, 0.2, KV)
		}
		if o.Arch == "qwen3" {
			add(b+"attn_q_norm.weight", roleNorm, i, 1, 0.1, D)
			add(b+"attn_k_norm.weight", roleNorm, i, 1, 0.1, D)
		}
		shape(add(b+"attn_output.weight", roleAttnOut, i, 0, sq(Q), Q, E), noBias)
		add(b+"ffn_norm.weight", roleNorm, i, 1, 0.1, E)
		gate := add(b+"ffn_gate.weight", roleMatrix, i, 0, sq(E), E, F)
		up := add(b+"ffn_up.weight", roleMatrix, i, 0, sq(E), E, F)
		down := add(b+"ffn_down.weight", roleFFNDown, i, 0, sq(F), F, E)
		switch {
		case lm == nil:
		case i < o.NLayer-1:
			ts[down].Shape = noBias
		default:
			ts[gate].Shape, ts[up].Shape, ts[down].Shape = lm.gateRow, lm.upRow, lm.downRow
		}
	}
	switch {
	case lm != nil:
		add("output_norm.weight", roleNorm, 0, lm.outNorm, 0.1*lm.outNorm, E)
		if !o.Tied {
			ts[add("output.weight", roleOutput, 0, 0, lm.nu, E, V)].Shape = lm.tokenRow
		}
	case o.Tied:
		// The output reuses token_embd (std 0.02): scale the final norm so the logits
		// still have a standard deviation of about 3.
		s := 3 / (0.02 * math.Sqrt(float64(E)))
		add("output_norm.weight", roleNorm, 0, s, 0.1*s, E)
	default:
		add("output_norm.weight", roleNorm, 0, 1, 0.1, E)
		add("output.weight", roleOutput, 0, 0, 3*sq(E), E, V)
	}
	return ts
}

// modelKVs is the general.* and architecture metadata llama.cpp reads.
func modelKVs(o Options, st typeSpec) []gguf.KV {
	a := o.Arch + "."
	kvs := []gguf.KV{}
	set := func(k string, v any) {
		val, err := gguf.NewValue(v)
		if err != nil {
			panic("BUG: synth metadata " + k + ": " + err.Error())
		}
		kvs = append(kvs, gguf.KV{Key: k, Value: val})
	}
	set("general.architecture", o.Arch)
	set("general.name", o.Name)
	set("general.description", fmt.Sprintf("synthetic random-weight model written by minfer synth: seed=%d fast=%v type=%s init=%s", o.Seed, o.Fast, o.Type, o.Init))
	set(a+"block_count", uint32(o.NLayer))
	set(a+"context_length", uint32(o.Ctx))
	set(a+"embedding_length", uint32(o.NEmbd))
	set(a+"feed_forward_length", uint32(o.NFF))
	set(a+"attention.head_count", uint32(o.NHead))
	set(a+"attention.head_count_kv", uint32(o.NHeadKV))
	set(a+"rope.freq_base", float32(o.RopeTheta))
	set(a+"attention.layer_norm_rms_epsilon", float32(o.RMSEps))
	if o.HeadDim*o.NHead != o.NEmbd {
		set(a+"attention.key_length", uint32(o.HeadDim))
		set(a+"attention.value_length", uint32(o.HeadDim))
	}
	set(a+"rope.dimension_count", uint32(o.HeadDim))
	if o.Arch == "llama" {
		set(a+"vocab_size", uint32(o.NVocab))
	}
	set("general.file_type", st.ftype)
	set("general.quantization_version", uint32(2))
	return kvs
}

// writer returns a gguf.Writer holding the metadata and one streamed tensor per planned
// tensor; its WriteTo generates the weights.
func (p *Plan) writer(ctx context.Context) (*gguf.Writer, error) {
	w := gguf.NewWriter()
	for _, kv := range p.KVs {
		if err := w.Set(kv.Key, kv.Value); err != nil {
			return nil, fmt.Errorf("synth: %w", err)
		}
	}
	for _, t := range p.Tensors {
		g := newTensorGen(p.Opts.Seed, t, p.Opts.Fast)
		err := w.AddTensorFunc(t.Name, t.Type, t.Dims, func(dst io.Writer) error { return g.writeTo(ctx, dst) })
		if err != nil {
			return nil, fmt.Errorf("synth: %w", err)
		}
	}
	return w, nil
}

// Bytes is the size of t's data in the file.
func (t Tensor) Bytes() uint64 {
	rows := uint64(1)
	for _, d := range t.Dims[1:] {
		rows *= d
	}
	rb, _ := t.Type.RowBytes(int(t.Dims[0]))
	return rows * uint64(rb)
}
