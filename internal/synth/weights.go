package synth

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"

	"github.com/minfer/minfer/core/quant"
)

// Weight generation. Every tensor has its own key, a hash of (seed, name); row r of a
// tensor is drawn from a PCG generator seeded with (key, r), in float32, and then
// converted to the tensor's type. So a tensor's float values depend only on the seed,
// its name and its shape, never on its type, the thread count or the other tensors.
//
// Distributions (mirroring the synthetic test models, which keep the logits' standard
// deviation near 3): token_embd N(0,1), or N(0,0.02) when the output is tied to it;
// attn_q/k/v, ffn_gate/up N(0,1/sqrt(n_embd)); attn_output N(0,1/sqrt(n_head·head_dim));
// ffn_down N(0,1/sqrt(n_ff)); norms and q/k norms N(1,0.1); q/k/v biases N(0,0.2);
// output N(0,3/sqrt(n_embd)); a tied model's output_norm is scaled by
// 3/(0.02·sqrt(n_embd)).
//
// --fast draws no floats for quantized tensors: it fills blocks with random bytes and
// overwrites their scales with finite f16 values sized so |w| stays within about
// |mean|+3·std. Those weights are valid but not related to the float ones.

// chunkBytes is the target size of the unit of work (a run of whole rows): small
// enough to keep a few in flight per core, large enough to amortise the hand-off.
const chunkBytes = 4 << 20

type tensorGen struct {
	t        Tensor
	key      uint64
	fast     bool
	rowLen   int
	rows     int
	rowBytes int
}

// synthKey is the generator key of a tensor (or another named part of the model, such
// as --init lm's codes): a hash of (seed, name).
func synthKey(seed uint64, name string) uint64 {
	h := fnv.New64a()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], seed)
	h.Write(b[:])
	h.Write([]byte(name))
	return h.Sum64()
}

func newTensorGen(seed uint64, t Tensor, fast bool) *tensorGen {
	g := &tensorGen{t: t, key: synthKey(seed, t.Name), fast: fast, rowLen: 1, rows: 1}
	if len(t.Dims) > 0 {
		g.rowLen = int(t.Dims[0])
	}
	for _, d := range t.Dims[min(1, len(t.Dims)):] {
		g.rows *= int(d)
	}
	rb, err := t.Type.RowBytes(g.rowLen)
	if err != nil {
		panic("BUG: synth: planned tensor " + t.Name + ": " + err.Error())
	}
	g.rowBytes = rb
	return g
}

// floatRow fills out (rowLen values) with row r's float32 weights.
func (g *tensorGen) floatRow(r int, out []float32) {
	rng := rand.New(rand.NewPCG(g.key, uint64(r)))
	for i := range out {
		out[i] = float32(g.t.Mean + g.t.Std*rng.NormFloat64())
	}
	if g.t.Shape != nil {
		g.t.Shape(r, out)
	}
}

// fillRows encodes rows [r0, r1) into dst.
func (g *tensorGen) fillRows(r0, r1 int, dst []byte, scratch []float32) error {
	if g.fast && g.t.Type.BlockSize() > 1 {
		g.fastBlocks(r0, dst)
		return nil
	}
	for r := r0; r < r1; r++ {
		g.floatRow(r, scratch)
		off := (r - r0) * g.rowBytes
		if err := quant.Quantize(g.t.Type, dst[off:off+g.rowBytes], scratch); err != nil {
			return fmt.Errorf("tensor %q: %w", g.t.Name, err)
		}
	}
	return nil
}

// writeTo generates the tensor chunk by chunk, several chunks at once, and writes them
// in order.
func (g *tensorGen) writeTo(ctx context.Context, dst io.Writer) error {
	per := max(1, chunkBytes/g.rowBytes)
	workers := runtime.GOMAXPROCS(0)
	bufs := make([][]byte, workers)
	scratch := make([][]float32, workers)
	errs := make([]error, workers)
	for start := 0; start < g.rows; start += per * workers {
		if err := ctx.Err(); err != nil {
			return err
		}
		var wg sync.WaitGroup
		n := 0
		for w := range workers {
			r0 := start + w*per
			if r0 >= g.rows {
				break
			}
			r1 := min(r0+per, g.rows)
			if bufs[w] == nil {
				bufs[w] = make([]byte, per*g.rowBytes)
				scratch[w] = make([]float32, g.rowLen)
			}
			n++
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[w] = g.fillRows(r0, r1, bufs[w][:(r1-r0)*g.rowBytes], scratch[w])
			}()
		}
		wg.Wait()
		for w := range n {
			if errs[w] != nil {
				return errs[w]
			}
			r0 := start + w*per
			r1 := min(r0+per, g.rows)
			if _, err := dst.Write(bufs[w][:(r1-r0)*g.rowBytes]); err != nil {
				return err
			}
		}
	}
	return nil
}

// fastBlocks fills dst (whole blocks of g's type, starting at row r0) with random bytes
// and valid scales.
func (g *tensorGen) fastBlocks(r0 int, dst []byte) {
	s := splitmix{g.key ^ uint64(r0)*0x9e3779b97f4a7c15}
	s.fill(dst)
	amax := math.Abs(g.t.Mean) + 3*g.t.Std
	bb := g.t.Type.BlockBytes()
	put := func(b []byte, v float64) { binary.LittleEndian.PutUint16(b, quant.F32ToF16(float32(v))) }
	for off := 0; off+bb <= len(dst); off += bb {
		b := dst[off : off+bb]
		switch g.t.Type {
		case quant.Q8_0: // d, qs[32] int8
			put(b, amax/127)
		case quant.Q4_0: // d, qs[16] nibbles: (q-8)·d
			put(b, amax/8)
		case quant.Q5_0: // d, qh[4], qs[16]: (q-16)·d
			put(b, amax/16)
		case quant.Q4_K: // d, dmin, scales[12] (6-bit), qs[128]: d·sc·q − dmin·m
			d := 2 * amax / (63 * 15)
			put(b, d)
			put(b[2:], 7.5*d) // E[d·sc·q] = E[dmin·m] when dmin = 7.5·d: mean ≈ 0
		case quant.Q5_1: // d, m, qh[4], qs[16]: d·q + m, q ≤ 31
			put(b, 2*amax/31)
			put(b[2:], -amax)
		case quant.Q3_K: // hmask[32], qs[64], scales[12] (6-bit, −32), d: d·(sc−32)·q, q −4..3
			put(b[108:], amax/(32*4))
		case quant.Q5_K: // d, dmin, scales[12] (6-bit), qh[32], qs[128]: d·sc·q − dmin·m, q ≤ 31
			d := 2 * amax / (63 * 31)
			put(b, d)
			put(b[2:], 15.5*d)
		case quant.Q6_K: // ql[128], qh[64], scales[16] int8, d: d·sc·(q−32)
			put(b[208:], amax/(128*32))
		case quant.IQ4_NL: // d, qs[16]: d·level, levels -127..113
			put(b, amax/127)
		case quant.IQ4_XS: // d, scales_h, scales_l[4], qs[128]: d·(ls−32)·level
			put(b, amax/(32*127))
		case quant.MXFP4: // e, qs[16]: 2^(e−128)·level, levels up to ±12
			b[0] = byte(128 + math.Round(math.Log2(amax/12)))
		case quant.IQ2_XXS, quant.IQ2_XS, quant.IQ2_S: // d first: d·(0.5+s)/4·mag, s ≤ 15, mag ≤ 43
			put(b, amax/(15.5/4*43))
		case quant.IQ3_XXS: // d·(0.5+s)/2·mag, mag ≤ 62
			put(b, amax/(15.5/2*62))
		case quant.IQ3_S: // d·(1+2s)·mag, mag ≤ 15
			put(b, amax/(31*15))
		case quant.IQ1_S: // d·(2s+1)·(level ± 1/8), s ≤ 7
			put(b, amax/(15*1.125))
		case quant.IQ1_M: // as IQ1_S, d in the top nibbles of the four scale words
			h := quant.F32ToF16(float32(amax / (15 * 1.125)))
			for i := 0; i < 4; i++ {
				b[49+2*i] = b[49+2*i]&0x0f | byte(h>>(4*i)&0xf)<<4
			}
		default:
			panic("BUG: synth: --fast has no block layout for " + g.t.Type.String())
		}
	}
}

// splitmix is SplitMix64: a tiny, fast generator for filling random bytes.
type splitmix struct{ s uint64 }

func (s *splitmix) next() uint64 {
	s.s += 0x9e3779b97f4a7c15
	z := s.s
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

func (s *splitmix) fill(b []byte) {
	for len(b) >= 8 {
		binary.LittleEndian.PutUint64(b, s.next())
		b = b[8:]
	}
	if len(b) > 0 {
		var t [8]byte
		binary.LittleEndian.PutUint64(t[:], s.next())
		copy(b, t[:])
	}
}
