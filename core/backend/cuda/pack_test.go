package cuda

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/quant"
	"github.com/minfer/minfer/cuda/driver"
)

// These tests need no GPU: they check the host-side packing and choosers.

// TestNibbleHalves: after pack's reorder, the low 16 bits of word k of a 32-value group
// hold values 4k … 4k+3 and its high 16 bits 16+4k … 16+4k+3, four bits each (what
// lut_dot in mmvk.cu and nib_at in common.cuh read), and the reorder loses nothing.
func TestNibbleHalves(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for range 100 {
		g := make([]byte, 16)
		for i := range g {
			g[i] = byte(rng.Uint32())
		}
		val := func(i int) uint32 { // value i of the group as GGUF stores it
			if i < 16 {
				return uint32(g[i] & 0xF)
			}
			return uint32(g[i-16] >> 4)
		}
		h := bytes.Clone(g)
		nibbleHalves(h)
		for k := range 4 {
			w := uint32(h[4*k]) | uint32(h[4*k+1])<<8 | uint32(h[4*k+2])<<16 | uint32(h[4*k+3])<<24
			for n := range 4 {
				if got := w >> (4 * n) & 0xF; got != val(4*k+n) {
					t.Fatalf("word %d nibble %d: %d, want value %d's %d", k, n, got, 4*k+n, val(4*k+n))
				}
				if got := w >> (16 + 4*n) & 0xF; got != val(16+4*k+n) {
					t.Fatalf("word %d nibble %d: %d, want value %d's %d", k, 4+n, got, 16+4*k+n, val(16+4*k+n))
				}
			}
		}
	}
}

// TestPackIQ4XSScales: pack gives each IQ4_XS group its scale ls − 32 as one signed
// byte of e, d as the block's f16, and the indices in halves order; checked against
// core/quant's dequantizer on blocks whose d is 1 and whose indices are all level 1,
// so every value of group g is its scale.
func TestPackIQ4XSScales(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	const rows, cols = 2, 512
	rb, _ := quant.IQ4_XS.RowBytes(cols)
	data := make([]byte, rows*rb)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	nb := len(data) / 136
	for b := range nb {
		blk := data[b*136:]
		blk[0], blk[1] = 0x00, 0x3C // d = 1
		for i := 8; i < 136; i++ {
			blk[i] = 0x88 // index 8 both nibbles: level 1
		}
	}
	layout, p, err := pack(quant.IQ4_XS, rows, cols, data)
	if err != nil || layout != "iq4_xs" {
		t.Fatalf("pack: %q, %v", layout, err)
	}
	f := make([]float32, rows*cols)
	if err := quant.Dequantize(quant.IQ4_XS, f, data); err != nil {
		t.Fatal(err)
	}
	if len(p.q) != nb*128 || len(p.d) != nb*2 || len(p.e) != nb*8 {
		t.Fatalf("sizes q %d d %d e %d for %d blocks", len(p.q), len(p.d), len(p.e), nb)
	}
	for b := range nb {
		if !bytes.Equal(p.d[2*b:2*b+2], data[b*136:b*136+2]) {
			t.Fatalf("block %d: d %x, want %x", b, p.d[2*b:2*b+2], data[b*136:b*136+2])
		}
		for g := range 8 {
			if got, want := float32(int8(p.e[8*b+g])), f[256*b+32*g]; got != want {
				t.Fatalf("block %d group %d: scale %v, dequantized value %v", b, g, got, want)
			}
		}
	}
}

func TestPackSplitsBlocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	tests := []struct {
		t                    quant.Type
		layout               string
		dOff, qOff, qLen, bs int
		eOff, eLen           int
	}{
		{quant.Q4_0, "q4_0", 0, 2, 16, 18, 0, 0},
		{quant.Q5_0, "q5_0", 0, 6, 16, 22, 2, 4},
		{quant.Q8_0, "q8_0", 0, 2, 32, 34, 0, 0},
		{quant.Q6_K, "q6_k", 208, 0, 208, 210, 0, 0},
	}
	// The types with wider scale fields (dLen > 2).
	wide := []struct {
		t                          quant.Type
		layout                     string
		dOff, dLen, qOff, qLen, bs int
		eOff, eLen                 int
	}{
		{quant.Q4_1, "q4_1", 0, 4, 4, 16, 20, 0, 0},
		{quant.Q5_1, "q5_1", 0, 4, 8, 16, 24, 4, 4},
		{quant.Q2_K, "q2_k", 80, 4, 16, 64, 84, 0, 16},
		{quant.Q3_K, "q3_k", 108, 2, 0, 96, 110, 96, 12},
		{quant.IQ4_NL, "iq4_nl", 0, 2, 2, 16, 18, 0, 0},
		{quant.MXFP4, "mxfp4", 0, 1, 1, 16, 17, 0, 0},
		{quant.IQ3_S, "iq3_s", 0, 2, 2, 64, 110, 66, 44},
		{quant.IQ3_XXS, "iq3_xxs", 0, 2, 2, 64, 98, 66, 32},
		{quant.IQ2_XXS, "iq2_xxs", 0, 2, 2, 64, 66, 0, 0},
		{quant.IQ2_XS, "iq2_xs", 0, 2, 2, 64, 74, 66, 8},
		{quant.IQ2_S, "iq2_s", 0, 2, 2, 64, 82, 66, 16},
	}
	for _, tt := range wide {
		t.Run(tt.layout, func(t *testing.T) {
			const rows, cols = 3, 512
			rb, _ := tt.t.RowBytes(cols)
			data := make([]byte, rows*rb)
			for i := range data {
				data[i] = byte(rng.Uint32())
			}
			layout, p, err := pack(tt.t, rows, cols, data)
			if err != nil || layout != tt.layout {
				t.Fatalf("pack: got %q, %v; want %q", layout, err, tt.layout)
			}
			nb := len(data) / tt.bs
			if len(p.q) != nb*tt.qLen || len(p.d) != tt.dLen*nb || len(p.e) != nb*tt.eLen {
				t.Fatalf("sizes q %d d %d e %d for %d blocks", len(p.q), len(p.d), len(p.e), nb)
			}
			wt, _ := wtypeOf(tt.t)
			for i := range nb {
				blk := data[i*tt.bs:]
				q := bytes.Clone(blk[tt.qOff : tt.qOff+tt.qLen])
				if wt.split.halves {
					nibbleHalves(q)
				}
				if !bytes.Equal(p.q[i*tt.qLen:(i+1)*tt.qLen], q) ||
					!bytes.Equal(p.d[tt.dLen*i:tt.dLen*(i+1)], blk[tt.dOff:tt.dOff+tt.dLen]) ||
					tt.eLen > 0 && !bytes.Equal(p.e[i*tt.eLen:(i+1)*tt.eLen], blk[tt.eOff:tt.eOff+tt.eLen]) {
					t.Fatalf("block %d not split as the layout says", i)
				}
			}
		})
	}
	for _, tt := range tests {
		t.Run(tt.layout, func(t *testing.T) {
			const rows, cols = 3, 512
			rb, _ := tt.t.RowBytes(cols)
			data := make([]byte, rows*rb)
			for i := range data {
				data[i] = byte(rng.Uint32())
			}
			layout, p, err := pack(tt.t, rows, cols, data)
			if err != nil || layout != tt.layout {
				t.Fatalf("pack: got %q, %v; want %q", layout, err, tt.layout)
			}
			nb := len(data) / tt.bs
			if len(p.q) != nb*tt.qLen || len(p.d) != 2*nb || len(p.e) != nb*tt.eLen {
				t.Fatalf("sizes q %d d %d e %d for %d blocks", len(p.q), len(p.d), len(p.e), nb)
			}
			for i := range nb {
				blk := data[i*tt.bs:]
				if !bytes.Equal(p.q[i*tt.qLen:(i+1)*tt.qLen], blk[tt.qOff:tt.qOff+tt.qLen]) ||
					!bytes.Equal(p.d[2*i:2*i+2], blk[tt.dOff:tt.dOff+2]) ||
					tt.eLen > 0 && !bytes.Equal(p.e[i*tt.eLen:(i+1)*tt.eLen], blk[tt.eOff:tt.eOff+tt.eLen]) {
					t.Fatalf("block %d not split as the layout says", i)
				}
			}
		})
	}
}

func TestPackPassThroughAndFallback(t *testing.T) {
	for _, typ := range []quant.Type{quant.F32, quant.F16, quant.Q4_K, quant.Q5_K} {
		rb, _ := typ.RowBytes(256)
		data := bytes.Repeat([]byte{0x11}, 2*rb)
		layout, p, err := pack(typ, 2, 256, data)
		if err != nil || !bytes.Equal(p.q, data) || p.d != nil {
			t.Errorf("%v: got layout %q err %v; want the bytes as stored", typ, layout, err)
		}
	}
	// Every one-row weight is dequantized to F32; a matrix of a type without kernels
	// becomes an F16 copy, never F32, unless a value is beyond F16's range.
	src := []float32{1, -2, 3.5, 0.25}
	f16 := make([]byte, 8)
	quant.F32RowToF16(f16, src)
	layout, p, err := pack(quant.F16, 1, 4, f16)
	if err != nil || layout != "f32" || len(p.q) != 16 {
		t.Fatalf("one-row F16: got %q, %d bytes, %v; want f32, 16 bytes", layout, len(p.q), err)
	}
	// IQ1_S has no CUDA kernel yet: an F16 copy (random blocks with a small scale:
	// minfer has no IQ1_S quantizer).
	iq := randomIQ1S(2)
	layout, p, err = pack(quant.IQ1_S, 2, 256, iq)
	if err != nil || layout != "f16" || len(p.q) != 1024 {
		t.Fatalf("IQ1_S: got layout %q, %d bytes, %v; want the 1024-byte f16 copy", layout, len(p.q), err)
	}
	want := make([]float32, 512)
	quant.Dequantize(quant.IQ1_S, want, iq)
	got := make([]float32, 512)
	quant.F16RowToF32(got, p.q)
	for i := range want {
		if r := quant.F16ToF32(quant.F32ToF16(want[i])); got[i] != r {
			t.Fatalf("IQ1_S copy [%d] = %v, want %v (the F16 rounding of %v)", i, got[i], r, want[i])
		}
	}
	vals := make([]float32, 64)
	for i := range vals {
		vals[i] = float32(i%7) - 3
	}
	// A BF16 matrix within F16's range is held as it is (native kernels).
	bfOK := make([]byte, 128)
	quant.Quantize(quant.BF16, bfOK, vals[:64])
	if layout, p, err := pack(quant.BF16, 2, 32, bfOK); err != nil || layout != "bf16" || !bytes.Equal(p.q, bfOK) {
		t.Errorf("BF16: got layout %q, %v; want bf16, the bytes as stored", layout, err)
	}
	big := make([]float32, 64)
	big[5] = 1e6
	bf := make([]byte, 128)
	quant.Quantize(quant.BF16, bf, big)
	if layout, p, err := pack(quant.BF16, 2, 32, bf); err != nil || layout != "f32" || len(p.q) != 256 {
		t.Errorf("BF16 beyond F16's range: got layout %q, %d bytes, %v; want the exact 256-byte f32", layout, len(p.q), err)
	}
	if _, _, err := pack(quant.TQ2_0, 2, 256, make([]byte, 132)); err == nil || !strings.Contains(err.Error(), "no CUDA kernel") {
		t.Errorf("TQ2_0: got %v, want a no-kernel error", err)
	}
}

// randomIQ1S is n random IQ1_S blocks whose f16 scale (the block's first two bytes) is
// 0.02, so values stay small.
func randomIQ1S(n int) []byte {
	rng := rand.New(rand.NewPCG(5, 6))
	bb := quant.IQ1_S.BlockBytes()
	b := make([]byte, n*bb)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	h := quant.F32ToF16(0.02)
	for i := 0; i < n; i++ {
		b[i*bb], b[i*bb+1] = byte(h), byte(h>>8)
	}
	return b
}

func TestAttnSplit(t *testing.T) {
	tier, _ := driver.TierFor(9, 0)
	b := &Backend{tier: tier}
	for _, ctx := range []int{1, 31, 33, 255, 256, 1000, 1025, 4096, 8192, 8193, 32768, 131072} {
		maxChunk, n := b.attnSplit(ctx)
		if n < 1 || n > tier.AttnMaxSplits || maxChunk%32 != 0 || maxChunk*n < ctx {
			t.Fatalf("ctx %d: max chunk %d × %d splits", ctx, maxChunk, n)
		}
		kv := &KV{spec: backend.KVSpec{Ctx: ctx}, chunk: tier.AttnChunk, nsplit: n, maxChunk: maxChunk}
		for _, nt := range []int{1, tier.GEMMMinRows} {
			minChunk, ns, maxC := b.attnParams(kv, nt)
			if ns < 1 || ns > n {
				t.Fatalf("ctx %d, nt %d: %d splits (cache has %d)", ctx, nt, ns, n)
			}
			// Every row position: its chunk fits the shared memory sized by maxC, its
			// splits fit the grid.
			for p1 := 1; p1 <= ctx; p1++ {
				c := attnChunk(p1, ns, minChunk)
				if c%32 != 0 || c < minChunk || c > maxC || ceilDiv(p1, c) > ns {
					t.Fatalf("ctx %d, nt %d, %d positions: chunk %d (max %d), %d splits used of %d", ctx, nt, p1, c, maxC, ceilDiv(p1, c), ns)
				}
			}
		}
	}
	if c := attnChunk(140, 32, tier.AttnChunk); c != 32 {
		t.Errorf("140 positions over 32 splits: chunk %d, want 32 (5 blocks per head)", c)
	}
}

// TestAttnPartShape: a split-K launch takes the grouped kernel (a block per KV head, the
// group's shared memory) from the tier's AttnGroupRows rows, for GQA groups of 2 …
// attnGroupMax heads whose shared memory fits 48 KB, unless a switch says otherwise;
// else a block per query head.
func TestAttnPartShape(t *testing.T) {
	tier, _ := driver.TierFor(9, 0)
	qwen7 := backend.Attn{Heads: 28, KVHeads: 4, HeadDim: 128}
	for _, c := range []struct {
		sw       string
		a        backend.Attn
		rows     int
		maxChunk int
		kernel   string
		blocksX  int
		shared   int
	}{
		{"", qwen7, 1, 64, "attn_part", 28, 4 * 192},
		{"", qwen7, tier.AttnGroupRows - 1, 64, "attn_part", 28, 4 * 192},
		{"", qwen7, tier.AttnGroupRows, 64, "attn_part_grp", 4, 7 * 4 * 192},
		{"", qwen7, 64, 4096, "attn_part", 28, 4 * 4224},                                         // 7 heads' 4,224 floats pass 48 KB
		{"", backend.Attn{Heads: 8, KVHeads: 8, HeadDim: 64}, 64, 64, "attn_part", 8, 4 * 128},   // no group
		{"", backend.Attn{Heads: 16, KVHeads: 1, HeadDim: 64}, 64, 64, "attn_part", 16, 4 * 128}, // past attnGroupMax
		{"all", qwen7, 1, 64, "attn_part_grp", 4, 7 * 4 * 192},
		{"none", qwen7, 64, 64, "attn_part", 28, 4 * 192},
	} {
		b := &Backend{tier: tier, sw: switches{attnGroup: c.sw}}
		kernel, grid, shared := b.attnPartShape("attn_part", c.a, c.rows, 32, c.maxChunk, false)
		if kernel != c.kernel || grid != (driver.Dim3{X: c.blocksX, Y: c.rows, Z: 32}) || shared != c.shared {
			t.Errorf("switch %q, %d/%d heads, %d rows, chunk %d: %s %+v %d B; want %s, %d blocks a row and split, %d B",
				c.sw, c.a.Heads, c.a.KVHeads, c.rows, c.maxChunk, kernel, grid, shared, c.kernel, c.blocksX, c.shared)
		}
	}
	// The fused kernels (attn_partc_*): the same grid, and room for the merge of the
	// splits (each split's max and sum, a head's total) where the scores take less.
	for _, c := range []struct {
		a        backend.Attn
		rows     int
		maxChunk int
		kernel   string
		shared   int
	}{
		{qwen7, 1, 64, "attn_partc", 4 * 192},
		{qwen7, tier.AttnGroupRows, 64, "attn_partc_grp", 7 * 4 * 192},
		{backend.Attn{Heads: 2, KVHeads: 2, HeadDim: 16}, 1, 32, "attn_partc", 4 * 65},
	} {
		b := &Backend{tier: tier}
		kernel, _, shared := b.attnPartShape("attn_part", c.a, c.rows, 32, c.maxChunk, true)
		if kernel != c.kernel || shared != c.shared {
			t.Errorf("fused, %d/%d heads, %d rows, chunk %d: %s %d B; want %s, %d B", c.a.Heads, c.a.KVHeads, c.rows,
				c.maxChunk, kernel, shared, c.kernel, c.shared)
		}
	}
}

func TestOpenWithoutGPU(t *testing.T) {
	if ok, _ := Available(); ok {
		t.Skip("a CUDA device is present")
	}
	// No driver, or a driver that sees no GPU (the CUDA toolkit's libcuda on a machine
	// without one): either way a reason that says which.
	says := func(s string) bool {
		return strings.Contains(s, "libcuda.so.1 not found") || strings.Contains(s, "is installed but sees no GPU")
	}
	ok, why := Available()
	if ok || !says(why) {
		t.Errorf("Available: got %v, %q; want false and a missing-driver or no-GPU reason", ok, why)
	}
	if _, err := Open(Options{}); err == nil || !says(err.Error()) {
		t.Errorf("Open: got %v, want a missing-driver or no-GPU error", err)
	}
}

func TestHeldAs(t *testing.T) {
	for _, tc := range []struct {
		t      quant.Type
		layout string
		want   quant.Type
	}{
		{quant.Q4_K, "q4_k", quant.Q4_K},
		{quant.F16, "f16", quant.F16},
		{quant.IQ1_S, "f16", quant.F16},
		{quant.Q3_K, "q3_k", quant.Q3_K},
		{quant.BF16, "bf16", quant.BF16},
		{quant.BF16, "f32", quant.F32},
		{quant.F16, "f32", quant.F32}, // a one-row F16 vector
	} {
		if got := (&Weight{t: tc.t, layout: tc.layout}).HeldAs(); got != tc.want {
			t.Errorf("%v as %q: HeldAs %v, want %v", tc.t, tc.layout, got, tc.want)
		}
	}
}
