package cuda

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/minfer/minfer/core/quant"
	"github.com/minfer/minfer/cuda/driver"
	"github.com/minfer/minfer/cuda/kernels"
)

// TestKernelNamesExist checks, without a GPU, that every entry point Open looks up is
// declared in its source as compiled (kernelSource: the .cu text and the type table's
// instantiation lines): literally (extern "C" __global__ void name) or through one of
// the instantiation macros (MMVQ(q4_k, …) makes mmvq_q4_k_1 … mmvq_q4_k_8, MMVQW(q4_k, …)
// mmvq_q4_kw_1 … mmvq_q4_kw_8; MMVQP, MMVQWP and MMVQRP the one-row prologue forms
// mmvq_q4_kp_1, mmvq_q4_kwp_1 and mmvq_q4_krp_1; ATTN_PARTC(name, …) and
// ATTN_PARTC_SEQS(name, …) the kernel name).
func TestKernelNamesExist(t *testing.T) {
	macro := regexp.MustCompile(`(?m)(?:^|\) )(MMVQ(?:WP|RP|[WRP])?|MMQ|EMBED|DEQUANT|ATTN_PARTC(?:_SEQS)?)\((\w+),`)
	names := kernelNames()
	for _, f := range kernels.Names() {
		s, err := kernelSource(f)
		if err != nil {
			t.Fatal(err)
		}
		src := string(s.Code)
		made := map[string]bool{}
		for _, m := range macro.FindAllStringSubmatch(src, -1) {
			switch m[1] {
			case "MMVQ", "MMVQW", "MMVQR":
				for nt := 1; nt <= 8; nt++ {
					made[fmt.Sprintf("mmvq_%s%s_%d", m[2], strings.ToLower(strings.TrimPrefix(m[1], "MMVQ")), nt)] = true
				}
			case "MMVQP", "MMVQWP", "MMVQRP":
				made[fmt.Sprintf("mmvq_%s%s_1", m[2], strings.ToLower(strings.TrimPrefix(m[1], "MMVQ")))] = true
			case "MMQ":
				for _, g := range mmqGs {
					made[fmt.Sprintf("mmq_%s_%d", m[2], g)] = true
				}
			case "EMBED":
				made["embed_"+m[2]] = true
			case "DEQUANT":
				made["dequant_f16_"+m[2]] = true
			case "ATTN_PARTC", "ATTN_PARTC_SEQS": // the kernel's own name
				made[m[2]] = true
			}
		}
		list, ok := names[f]
		if !ok {
			t.Errorf("%s: no entry list in kernelNames", f)
		}
		for _, n := range list {
			if !made[n] && !strings.Contains(src, "void "+n+"(") && !strings.Contains(src, ") "+n+"(") {
				t.Errorf("%s: kernel %s is looked up but not declared", f, n)
			}
		}
	}
	for f := range names {
		if _, _, err := kernels.Source(f); err != nil {
			t.Errorf("kernelNames lists %s, which is not an embedded source", f)
		}
	}
}

// TestTypeTable checks the weight-type table against the sources and the tiers: every
// mat-vec traits struct it names is defined in its source (mmvq.cu or mmvk.cu), every layout's WType constant in
// common.cuh, each type's last mat-vec kernel takes any column count its blocks allow,
// and every tier's PairRows names only kernels with a two-row form.
func TestTypeTable(t *testing.T) {
	mq, _ := kernelSource("mmq.cu")
	_, hdrs, _ := kernels.Source("mmvq.cu")
	common := string(hdrs["common.cuh"])
	for _, w := range wtypes {
		if !strings.Contains(common, w.cw()+" = ") {
			t.Errorf("%s: common.cuh has no %s", w.layout, w.cw())
		}
		if bs := w.t.BlockSize(); w.mv[len(w.mv)-1].cols != bs {
			t.Errorf("%s: last mat-vec kernel needs cols %% %d, the type's blocks are %d values", w.layout, w.mv[len(w.mv)-1].cols, bs)
		}
		mm, err := kernelSource(w.mvFile())
		if err != nil {
			t.Fatalf("%s: %v", w.layout, err)
		}
		code := string(mm.Code)
		if w.mvFile() == "mmvq.cu" { // its traits are in a header mmvp.cu shares
			code = string(mm.Headers["mmvq_traits.cuh"])
		}
		for _, k := range w.mv {
			base, _, _ := strings.Cut(k.traits, "<")
			if !strings.Contains(code, "struct "+base+" {") {
				t.Errorf("%s: mat-vec traits %s not defined in %s", k.name, k.traits, w.mvFile())
			}
		}
		if w.mmq != "" && !strings.Contains(string(mq.Code), "struct "+w.mmq+" ") {
			t.Errorf("%s: mmq traits %s not defined in mmq.cu", w.layout, w.mmq)
		}
		if got, ok := wtypeOf(w.t); !ok || got.layout != w.layout {
			t.Errorf("wtypeOf(%v) = %v, %v", w.t, got, ok)
		}
	}
	for _, tr := range driver.Tiers() {
		for k := range tr.PairRows {
			if mk, ok := mvKernelByName(k); !ok || !mk.pair {
				t.Errorf("tier %s: PairRows names %q, which has no two-row form", tr.Name, k)
			}
		}
	}
}

// gridTable parses the C array name of a kernel header: its entries, in order.
func gridTable(t *testing.T, header, name string) []uint64 {
	t.Helper()
	_, hdrs, err := kernels.Source("mmvk.cu")
	if err != nil {
		t.Fatal(err)
	}
	_, body, ok := strings.Cut(string(hdrs[header]), " "+name+"[")
	if !ok {
		t.Fatalf("%s: no table %s", header, name)
	}
	_, body, _ = strings.Cut(body, "{")
	body, _, _ = strings.Cut(body, "}")
	var out []uint64
	for _, f := range strings.FieldsFunc(body, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' }) {
		v, err := strconv.ParseUint(strings.TrimSuffix(f, "ull"), 0, 64)
		if err != nil {
			t.Fatalf("%s: %s: %q: %v", header, name, f, err)
		}
		out = append(out, v)
	}
	return out
}

// TestIQGrids: the codebooks compiled into the kernels (iq3s_grid.cuh, iq_grids.cuh) are
// core/quant's: entry i's bytes are the magnitudes quant decodes (divided by the
// block's scale) from a block whose first run indexes i (d = 1, scale field 0, no signs).
func TestIQGrids(t *testing.T) {
	for _, tc := range []struct {
		typ          quant.Type
		header, name string
		n, per       int     // entries, magnitudes per entry
		db           float32 // the block's value scale: d·(0.5+0)·fscale, or IQ3_S's d·1
		set          func(blk []byte, i int)
	}{
		{quant.IQ3_S, "iq3s_grid.cuh", "iq3s_grid", 512, 4, 1, func(b []byte, i int) { b[2], b[66] = byte(i), byte(i>>8) }},
		{quant.IQ2_XXS, "iq_grids.cuh", "iq2xxs_grid", 256, 8, 0.125, func(b []byte, i int) { b[2] = byte(i) }},
		{quant.IQ2_XS, "iq_grids.cuh", "iq2xs_grid", 512, 8, 0.125, func(b []byte, i int) { b[2], b[3] = byte(i), byte(i>>8) }},
		{quant.IQ2_S, "iq_grids.cuh", "iq2s_grid", 1024, 8, 0.125, func(b []byte, i int) { b[2], b[66] = byte(i), byte(i>>8) }},
		{quant.IQ3_XXS, "iq_grids.cuh", "iq3xxs_grid", 256, 4, 0.25, func(b []byte, i int) { b[2] = byte(i) }},
	} {
		grid := gridTable(t, tc.header, tc.name)
		if len(grid) != tc.n {
			t.Fatalf("%s has %d entries, want %d", tc.name, len(grid), tc.n)
		}
		blk := make([]byte, tc.typ.BlockBytes())
		out := make([]float32, 256)
		for i, w := range grid {
			clear(blk)
			blk[0], blk[1] = 0x00, 0x3c // f16 1.0
			tc.set(blk, i)
			if err := quant.Dequantize(tc.typ, out, blk); err != nil {
				t.Fatal(err)
			}
			for k := range tc.per {
				if got := float32(w>>(8*k)&0xFF) * tc.db; out[k] != got {
					t.Fatalf("%s entry %d byte %d: kernels %v, core/quant %v", tc.name, i, k, got, out[k])
				}
			}
		}
	}
}
