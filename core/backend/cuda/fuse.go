package cuda

import (
	"strings"

	"github.com/minfer/minfer/cuda/driver"
)

// Fewer launches in a one-row forward (a decode or draft step, issue 19). A 0.5B step
// is ~270 kernels of a few µs each, bound by launch and tail latency rather than bytes,
// so work that is cheap to repeat moves into the kernel that consumes it:
//
//   - a one-row RMSNorm or SwiGLU is held back (pendingPro) and each mat-vec launch that
//     reads its output computes it again in its prologue (mmvq_KERNELp_1: every block
//     from the producer's inputs, into shared memory, with the producer's bits); the
//     first such launch also writes the output and its 8-bit shadow, so the buffer
//     holds what the op promised. Another reader, or any other op, launches it as
//     before.
//   - the residual add after a one-row mat-vec (Add(x, y) where y is a pending
//     MatMul's output) is done in that mat-vec's epilogue (mvSet.res), so the RMSNorm
//     after it has no add to take and can be held back in turn.
//
// A layer of a Q8_0 Qwen2.5 then launches norm+q/k/v+RoPE, attention (2), o+add,
// norm+gate/up, SwiGLU+down+add: 6 kernels instead of 9. Every value has the unfused
// kernels' bits (common.cuh rms_* and silu_mul, mmvq.cuh mv_prologue), so a one-row
// step still matches the rows of a verify forward. MINFER_FUSE_MATVEC=1 turns them on
// (off by default: the one device run of this code, v13b in perf-cuda.md, stopped at a
// launch-argument limit before it measured anything); MINFER_NO_FUSE_NORM_MATVEC,
// MINFER_NO_FUSE_SWIGLU_MATVEC and MINFER_NO_FUSE_RESIDUAL then turn each off again.

// Prologue kinds (mmvq.cuh PRO_NORM, PRO_GLU).
const (
	proNorm = 1
	proGLU  = 2
)

// proMaxCols is the widest x a prologue computes: its shared memory (proShared) stays
// under the 48 KB a launch gets without opting in.
const proMaxCols = 5120

// proMaxBytesPerSM bounds the prologue's re-reading: each block reads the producer's
// 2·cols inputs again, so a launch of many blocks (a 151,936-row classifier, a 7B's
// 18,944-row gate) would spend more reading them than the producer's launch costs.
// At 96 KB per SM (≈ 1 µs at an SM's ~100 GB/s from L2) the 0.5B's q/k/v, gate/up and
// down launches take the prologue (7-66 KB per SM), the classifier (≈ 1 MB) does not.
const proMaxBytesPerSM = 96 << 10

// proShared is a prologue kernel's dynamic shared memory for x of cols values
// (mmvq.cuh pro_args: 2·cols staging floats, cols int8 values, cols/32 scales).
func proShared(cols int) int { return 8*cols + cols + cols/8 }

// proName is the prologue form of a one-row mat-vec kernel (mmvq_q8_0_1 →
// mmvq_q8_0p_1, mmvq_q8_0w_1 → mmvq_q8_0wp_1).
func proName(kernel string) string { return strings.TrimSuffix(kernel, "_1") + "p_1" }

// pendingPro is a held-back one-row RMSNorm (kind proNorm: x = a, weight b) or SwiGLU
// (proGLU: gate a, up b) writing n values to dst (df, and its shadow dq/dd). used: a
// pending mat-vec launch computes it in its prologue; else flush launches alone.
type pendingPro struct {
	kind       int
	a, b       driver.DevicePtr
	eps        float32
	n          int
	dst        *Buffer
	df, dq, dd driver.DevicePtr
	used       bool
	alone      launchSpec
}

// args are a prologue kernel's last arguments (mmvq.cuh MMVQ_PRO); the outputs only
// for the launch that writes them.
func (p *pendingPro) args(write bool) []driver.Arg {
	var df, dq, dd driver.DevicePtr
	if write {
		df, dq, dd = p.df, p.dq, p.dd
	}
	return []driver.Arg{driver.I(p.kind), driver.P(p.a), driver.P(p.b), driver.F(p.eps), driver.P(df), driver.P(dq), driver.P(dd)}
}

// holdPro records a producer's one-row op instead of launching it (the caller has
// flushed; nothing else is pending): its output is written and its shadow valid from
// now on, by the launch alone or by the first consumer.
func (b *Backend) holdPro(p *pendingPro) {
	p.dst.wrote()
	p.df = p.dst.p
	if p.dq, p.dd = b.shadow(p.dst); p.dq == 0 {
		return
	}
	b.setShadow(p.dst, p.n)
	b.ppro = p
}

// canHold reports whether a one-row producer of n values into dst, reading a and b,
// may be held back.
func canHold(n int, dst, a, b *Buffer) bool {
	return n%32 == 0 && n <= proMaxCols && dst != a && dst != b
}

// takePro reports whether a one-row mat-vec of w (rows × cols) reading x computes x
// in its prologue, and marks the held producer taken. Only the producer's output
// qualifies, at nt = 1, for the types with prologue kernels and launches small enough
// (proMaxBytesPerSM).
func (b *Backend) takePro(x *Buffer, w *Weight, nt int, p mmPlan) (*pendingPro, bool) {
	pp := b.ppro
	if pp == nil || pp.dst != x || nt != 1 || p.path != pathMV || w.cols != pp.n || !wtypeByLayout(w.layout).pro() {
		return nil, false
	}
	blocks := ceilDiv(w.rows, b.tier.MMVQWarps)
	if int64(blocks)*int64(8*w.cols) > int64(proMaxBytesPerSM)*int64(b.ctx.Props.SMs) {
		return nil, false
	}
	write := !pp.used
	pp.used = true
	return pp, write
}

// foldResidual does Add(dst, x) in the epilogue of the pending one-row mat-vec that
// writes x, if there is one and its inputs are not dst; it reports whether it did.
func (b *Backend) foldResidual(d, x *Buffer, n int) bool {
	if b.sw.noResidual || len(b.pend) != 1 || b.padd != nil {
		return false
	}
	mm := &b.pend[0]
	if mm.dst != x || mm.nt != 1 || mm.rows != n || len(mm.launches) != 1 {
		return false
	}
	m := mm.launches[0].mv
	if m == nil || m.mmq || len(m.sets) != 1 || m.sets[0].res != 0 || m.xf == d.p {
		return false
	}
	if m.pro != nil && (m.pro.a == d.p || m.pro.b == d.p) {
		return false
	}
	m.sets[0].res = d.p
	d.wrote()
	return true
}
