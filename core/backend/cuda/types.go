package cuda

import (
	"fmt"
	"strings"

	"github.com/minfer/minfer/core/quant"
)

// wtype is what the CUDA backend knows about one weight type its kernels read (ggml's
// type_traits is the model): how pack lays its blocks out on the device, the C++ names
// of its layout and mat-vec traits, and its kernels. Every use reads this table: pack,
// the kernel names Open looks up, the instantiation lines compiled into mmvq.cu or
// mmvk.cu, embed.cu and gemm.cu (instances), MatMul's kernel choice and the tests.
type wtype struct {
	t quant.Type
	// layout is the kernel suffix (embed_LAYOUT, dequant_f16_LAYOUT); its upper case after
	// W_ is common.cuh's WType constant (W_Q4_K).
	layout string
	// split says how pack splits each GGUF block into the q, d and e arrays (common.cuh's
	// layouts); nil keeps the blocks as stored.
	split *blockSplit
	// mv are the mat-vec kernels (mmvq_NAME_nt), the first whose cols divisor divides the
	// weight's columns serves it.
	mv []mvKernel
	// mmq is the C++ traits struct of the small-nt tensor-core kernel (mmq.cu,
	// mmq_LAYOUT_G), "" when the type has none (F32, F16: their mat-vec takes f32
	// activations, which an f16 mma could not match bit for bit). A type without one
	// serves nt < GEMMMinRows with mat-vec launches of MMVQMaxRows rows, which keep
	// every row's single-row bits as well (Caps.IdentityRows holds for it).
	mmq string
	// mvSrc is the source holding the type's mat-vec traits and instances: mmvq.cu
	// (""), or mmvk.cu for the types added for issue 25 (compiled in parallel).
	mvSrc string
	// floatX: the mat-vec reads f32 activations (F32, F16, BF16), not their 8-bit form.
	floatX bool
}

// blockSplit: a block of the type's GGUF size holds its scales at dOff (dLen bytes, 2
// when 0: one f16), qLen bytes of values at qOff and eLen bytes of extra fields (fifth
// bits, sub-block scales) at eOff; pack gathers each into its array.
type blockSplit struct {
	dOff, dLen, qOff, qLen, eOff, eLen int
	// halves: q holds 32-value groups of 4-bit indices (byte i: value i in its low
	// nibble, 16 + i in its high one), and pack reorders each 4-byte word of a group so
	// that its low 16 bits hold the four low nibbles and its high 16 bits the four high
	// ones (see nibbleHalves): a lookup of four levels then reads one half of a word, in
	// the activations' order, with no byte interleave after it (common.cuh's lut_dot).
	halves bool
	// eFrom, when set, derives a block's eLen bytes of e from the whole GGUF block
	// instead of copying them from eOff (IQ4_XS: its eight 6-bit group scales, split
	// over two fields, as one signed byte each).
	eFrom func(blk, e []byte)
}

// iq4xsScales writes the eight group scales of an IQ4_XS block (d f16, scales_h u16,
// scales_l[4], qs[128]) as int8 ls − 32: group g's 6-bit ls is nibble g%2 of
// scales_l[g/2] with bits 2g, 2g+1 of scales_h above it.
func iq4xsScales(blk, e []byte) {
	sh := uint16(blk[2]) | uint16(blk[3])<<8
	for g := range 8 {
		ls := (blk[4+g/2]>>(4*(g%2)))&0xF | byte(sh>>(2*g)&3)<<4
		e[g] = byte(int8(ls) - 32)
	}
}

// dBytes is the scale bytes per block.
func (s *blockSplit) dBytes() int {
	if s.dLen == 0 {
		return 2
	}
	return s.dLen
}

// mvKernel is one mat-vec kernel of a type: mmvq_NAME_1 … mmvq_NAME_8 instantiated with
// the C++ traits struct (mmvq.cu), with a two-row form mmvq_NAMEw_nt when pair is set.
type mvKernel struct {
	name, traits string
	cols         int // the weight's columns must be a multiple of it
	pair         bool
}

// wtypes is the table, in common.cuh's WType order.
var wtypes = []wtype{
	{t: quant.F32, layout: "f32", floatX: true, mv: []mvKernel{{"f32v", "TF32<true>", 4, false}, {"f32s", "TF32<false>", 1, false}}},
	{t: quant.F16, layout: "f16", floatX: true, mv: []mvKernel{{"f16v", "TF16<true>", 8, true}, {"f16s", "TF16<false>", 1, false}}},
	{t: quant.Q4_0, layout: "q4_0", split: &blockSplit{dOff: 0, qOff: 2, qLen: 16}, mv: []mvKernel{{"q4_0", "TQ4_0", 32, true}}, mmq: "MQ4_0"},
	{t: quant.Q5_0, layout: "q5_0", split: &blockSplit{dOff: 0, qOff: 6, qLen: 16, eOff: 2, eLen: 4}, mv: []mvKernel{{"q5_0", "TQ5_0", 32, true}}, mmq: "MQ5_0"},
	{t: quant.Q8_0, layout: "q8_0", split: &blockSplit{dOff: 0, qOff: 2, qLen: 32}, mv: []mvKernel{{"q8_0", "TQ8_0", 32, true}}, mmq: "MQ8_0"},
	{t: quant.Q4_K, layout: "q4_k", mv: []mvKernel{{"q4_k", "TQ4_K", 256, true}}, mmq: "MQ4_K"},
	{t: quant.Q5_K, layout: "q5_k", mv: []mvKernel{{"q5_k", "TQ5_K", 256, true}}, mmq: "MQ5_K"},
	{t: quant.Q6_K, layout: "q6_k", split: &blockSplit{dOff: 208, qOff: 0, qLen: 208}, mv: []mvKernel{{"q6_k", "TQ6_K", 256, true}}, mmq: "MQ6_K"},
	// Issue 25's types (mmvk.cu): mat-vec kernels, no mmq kernel yet.
	{t: quant.BF16, layout: "bf16", floatX: true, mvSrc: "mmvk.cu", mv: []mvKernel{{"bf16v", "TBF16<true>", 8, false}, {"bf16s", "TBF16<false>", 1, false}}},
	{t: quant.Q4_1, layout: "q4_1", mvSrc: "mmvk.cu", split: &blockSplit{dOff: 0, dLen: 4, qOff: 4, qLen: 16}, mv: []mvKernel{{"q4_1", "TQ4_1", 32, false}}},
	{t: quant.Q5_1, layout: "q5_1", mvSrc: "mmvk.cu", split: &blockSplit{dOff: 0, dLen: 4, qOff: 8, qLen: 16, eOff: 4, eLen: 4}, mv: []mvKernel{{"q5_1", "TQ5_1", 32, false}}},
	{t: quant.Q2_K, layout: "q2_k", mvSrc: "mmvk.cu", split: &blockSplit{dOff: 80, dLen: 4, qOff: 16, qLen: 64, eOff: 0, eLen: 16}, mv: []mvKernel{{"q2_k", "TQ2_K", 256, false}}},
	{t: quant.Q3_K, layout: "q3_k", mvSrc: "mmvk.cu", split: &blockSplit{dOff: 108, qOff: 0, qLen: 96, eOff: 96, eLen: 12}, mv: []mvKernel{{"q3_k", "TQ3_K", 256, true}}},
	{t: quant.IQ4_NL, layout: "iq4_nl", mvSrc: "mmvk.cu", split: &blockSplit{dOff: 0, qOff: 2, qLen: 16, halves: true}, mv: []mvKernel{{"iq4_nl", "TIQ4_NL", 32, false}}},
	{t: quant.IQ4_XS, layout: "iq4_xs", mvSrc: "mmvk.cu", split: &blockSplit{dOff: 0, qOff: 8, qLen: 128, eLen: 8, halves: true, eFrom: iq4xsScales}, mv: []mvKernel{{"iq4_xs", "TIQ4_XS", 256, true}}},
	{t: quant.MXFP4, layout: "mxfp4", mvSrc: "mmvk.cu", split: &blockSplit{dOff: 0, dLen: 1, qOff: 1, qLen: 16, halves: true}, mv: []mvKernel{{"mxfp4", "TMXFP4", 32, false}}},
	{t: quant.IQ3_S, layout: "iq3_s", mvSrc: "mmvk.cu", split: &blockSplit{dOff: 0, qOff: 2, qLen: 64, eOff: 66, eLen: 44}, mv: []mvKernel{{"iq3_s", "TIQ3_S", 256, false}}},
	{t: quant.IQ3_XXS, layout: "iq3_xxs", mvSrc: "mmvk.cu", split: &blockSplit{dOff: 0, qOff: 2, qLen: 64, eOff: 66, eLen: 32}, mv: []mvKernel{{"iq3_xxs", "TIQG<W_IQ3_XXS>", 256, false}}},
	{t: quant.IQ2_XXS, layout: "iq2_xxs", mvSrc: "mmvk.cu", split: &blockSplit{dOff: 0, qOff: 2, qLen: 64}, mv: []mvKernel{{"iq2_xxs", "TIQG<W_IQ2_XXS>", 256, false}}},
	{t: quant.IQ2_XS, layout: "iq2_xs", mvSrc: "mmvk.cu", split: &blockSplit{dOff: 0, qOff: 2, qLen: 64, eOff: 66, eLen: 8}, mv: []mvKernel{{"iq2_xs", "TIQG<W_IQ2_XS>", 256, false}}},
	{t: quant.IQ2_S, layout: "iq2_s", mvSrc: "mmvk.cu", split: &blockSplit{dOff: 0, qOff: 2, qLen: 64, eOff: 66, eLen: 16}, mv: []mvKernel{{"iq2_s", "TIQG<W_IQ2_S>", 256, false}}},
}

// mvFile is the source of the type's mat-vec kernels.
func (w *wtype) mvFile() string {
	if w.mvSrc == "" {
		return "mmvq.cu"
	}
	return w.mvSrc
}

// mvMaxNT is the largest nt a mat-vec kernel is instantiated for (mmvq_NAME_1 … _8).
const mvMaxNT = 8

// mmqGs are the activation tiles of 8 rows an mmq block takes, one kernel each
// (mmq_LAYOUT_1 … _8, mmq.cu's MMQ): with G = 8 every nt up to 64 is one group.
var mmqGs = []int{1, 2, 4, 8}

// mmqMaxG is the largest of mmqGs.
const mmqMaxG = 8

// mmqWarps is the warps of an mmq block of g tiles (mmq.cu's MMQ_W).
func mmqWarps(g int) int {
	if g <= 2 {
		return 8
	}
	return 16
}

// wtypeOf finds a type the kernels read natively.
func wtypeOf(t quant.Type) (*wtype, bool) {
	for i := range wtypes {
		if wtypes[i].t == t {
			return &wtypes[i], true
		}
	}
	return nil, false
}

// wtypeByLayout finds the table row of a device layout ("q4_k").
func wtypeByLayout(layout string) *wtype {
	for i := range wtypes {
		if wtypes[i].layout == layout {
			return &wtypes[i]
		}
	}
	panic("BUG: cuda: no weight type with layout " + layout)
}

// pro reports whether the type's nt = 1 mat-vec kernels have the prologue forms
// (mmvp.cu: mmvq_NAMEp_1, NAMEwp_1, NAMErp_1) that compute x from its producer's
// inputs: the quantized types of mmvq.cu (the 8-bit x a prologue makes; mmvk.cu's
// types and the float ones keep the producer's launch).
func (w *wtype) pro() bool { return w.mvFile() == "mmvq.cu" && !w.floatX }

// cw is the layout's common.cuh WType constant.
func (w *wtype) cw() string { return "W_" + strings.ToUpper(w.layout) }

// mvFor is the mat-vec kernel serving a weight of cols columns.
func (w *wtype) mvFor(cols int) mvKernel {
	for _, k := range w.mv {
		if cols%k.cols == 0 {
			return k
		}
	}
	panic(fmt.Sprintf("BUG: cuda: no %s mat-vec kernel for %d columns", w.layout, cols))
}

// mvKernelByName finds a mat-vec kernel of the table.
func mvKernelByName(name string) (mvKernel, bool) {
	for _, w := range wtypes {
		for _, k := range w.mv {
			if k.name == name {
				return k, true
			}
		}
	}
	return mvKernel{}, false
}

// instances is the instantiation text appended to a kernel source (each .cu defines the
// macros, the table says what they make), "" for sources without per-type kernels.
func instances(src string) string {
	var b strings.Builder
	for _, w := range wtypes {
		switch src {
		case "embed.cu":
			fmt.Fprintf(&b, "EMBED(%s, %s)\n", w.layout, w.cw())
		case "gemm.cu":
			if w.t != quant.F16 {
				fmt.Fprintf(&b, "DEQUANT(%s, %s)\n", w.layout, w.cw())
			}
		case "mmq.cu":
			if w.mmq != "" {
				fmt.Fprintf(&b, "MMQ(%s, %s)\n", w.layout, w.mmq)
			}
		case "mmvp.cu":
			for _, k := range w.mv {
				if w.pro() {
					fmt.Fprintf(&b, "MMVQP(%s, %s)\nMMVQRP(%s, %s)\n", k.name, k.traits, k.name, k.traits)
					if k.pair {
						fmt.Fprintf(&b, "MMVQWP(%s, %s)\n", k.name, k.traits)
					}
				}
			}
		case w.mvFile():
			for _, k := range w.mv {
				fmt.Fprintf(&b, "MMVQ(%s, %s)\n", k.name, k.traits)
				if k.pair {
					fmt.Fprintf(&b, "MMVQW(%s, %s)\n", k.name, k.traits)
				}
				fmt.Fprintf(&b, "MMVQR(%s, %s)\n", k.name, k.traits)
			}
		}
	}
	return b.String()
}

// typeKernels are the per-type entry points of a source, as instances makes them.
func typeKernels(src string) []string {
	var n []string
	for _, w := range wtypes {
		switch src {
		case "embed.cu":
			n = append(n, "embed_"+w.layout)
		case "gemm.cu":
			if w.t != quant.F16 {
				n = append(n, "dequant_f16_"+w.layout)
			}
		case "mmq.cu":
			for _, g := range mmqGs {
				if w.mmq != "" {
					n = append(n, fmt.Sprintf("mmq_%s_%d", w.layout, g))
				}
			}
		case "mmvp.cu":
			for _, k := range w.mv {
				if w.pro() { // x from a prologue (mmvq.cuh MMVQP1R): nt = 1 only
					n = append(n, "mmvq_"+k.name+"p_1", "mmvq_"+k.name+"rp_1")
					if k.pair {
						n = append(n, "mmvq_"+k.name+"wp_1")
					}
				}
			}
		case w.mvFile():
			for _, k := range w.mv {
				for nt := 1; nt <= mvMaxNT; nt++ {
					n = append(n, fmt.Sprintf("mmvq_%s_%d", k.name, nt))
					if k.pair {
						n = append(n, fmt.Sprintf("mmvq_%sw_%d", k.name, nt))
					}
				}
				n = append(n, "mmvq_"+k.name+"r_1") // the fused q/k/v + RoPE kernel: nt = 1 only
			}
		}
	}
	return n
}
