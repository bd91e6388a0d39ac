package cuda

import (
	"fmt"
	"os"
	"strconv"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/quant"
	"github.com/minfer/minfer/cuda/driver"
)

// switches are the MINFER_NO_* environment switches that turn a specialised path off,
// to bisect a wrong result to one kernel. They are read at Open.
type switches struct {
	noMultiRow  bool   // matmul: one mat-vec launch per row
	noGraphs    bool   // Run: enqueue ops, never capture
	noSeqGraphs bool   // RunSeqs: enqueue a batched forward's ops, never capture
	noGEMM      bool   // matmul: chunked mat-vec (or mmq) for every nt
	noMMQ       bool   // matmul: mat-vec launches instead of the small-nt tensor-core kernel
	mmqAll      bool   // matmul: the small-nt tensor-core kernel from 2 rows for every type that has one
	mmqG        int    // matmul: activation tiles per mmq block (MINFER_MMQ_G=1, 2, 4 or 8; 0: the chooser's)
	noFuse      bool   // residual add + RMSNorm as two kernels
	noFuseRoPE  bool   // q/k/v mat-vec and rope_store as separate kernels
	noPDL       bool   // launches: no programmatic dependent launch
	noMerge     bool   // matmul: one mat-vec launch per weight
	pairRows    string // matmul: "all" or "none" overrides the tier's PairRows
	noCUBLAS    bool   // matmul: minfer's GEMM kernel even where cuBLAS loads
	noFlash     bool   // attention: the split-K kernels for prefill too
	attnGroup   string // attention: "all" takes the grouped split-K kernels from one row, "none" never
	noActRound  bool   // matmul: the prefill GEMM rounds x straight to f16
	noCombine   bool   // attention: attn_combine as a launch of its own, not in the split-K launch's last block
	// The one-row fusions of fuse.go, on with MINFER_FUSE_MATVEC=1 (not yet measured
	// on a GPU), each then off again with its MINFER_NO_* switch.
	noProNorm  bool // RMSNorm launched, not recomputed in the prologue of the mat-vec that reads it
	noProGLU   bool // SwiGLU launched, not recomputed in the prologue of the mat-vec that reads it
	noResidual bool // residual add held for the next RMSNorm, not in the epilogue of the mat-vec that makes it
}

func readSwitches() switches {
	on := func(k string) bool { return os.Getenv(k) == "1" }
	return switches{noMultiRow: on("MINFER_NO_MMVQ_MULTIROW"), noGraphs: on("MINFER_NO_GRAPHS"), noSeqGraphs: on("MINFER_NO_SEQ_GRAPHS"), noGEMM: on("MINFER_NO_GEMM"), noMMQ: on("MINFER_NO_MMQ"), mmqAll: os.Getenv("MINFER_MMQ") == "all", mmqG: mmqGEnv(), noFuse: on("MINFER_NO_FUSE_ADD_NORM"), noFuseRoPE: on("MINFER_NO_FUSE_ROPE"),
		noPDL: on("MINFER_NO_PDL"), noMerge: on("MINFER_NO_MMVQ_MERGE"), pairRows: os.Getenv("MINFER_PAIR_ROWS"), noCUBLAS: on("MINFER_NO_CUBLAS"), noFlash: on("MINFER_NO_FLASH"), attnGroup: attnGroupEnv(),
		noActRound: on("MINFER_NO_ACT_ROUND"), noCombine: on("MINFER_NO_FUSE_ATTN_COMBINE"), noProNorm: !on("MINFER_FUSE_MATVEC") || on("MINFER_NO_FUSE_NORM_MATVEC"),
		noProGLU: !on("MINFER_FUSE_MATVEC") || on("MINFER_NO_FUSE_SWIGLU_MATVEC"), noResidual: !on("MINFER_FUSE_MATVEC") || on("MINFER_NO_FUSE_RESIDUAL")}
}

// attnGroupEnv is the grouped attention kernels' switch: "none" for MINFER_NO_ATTN_GROUP=1,
// "all" for MINFER_ATTN_GROUP=all, else "" (the tier's AttnGroupRows).
func attnGroupEnv() string {
	switch {
	case os.Getenv("MINFER_NO_ATTN_GROUP") == "1":
		return "none"
	case os.Getenv("MINFER_ATTN_GROUP") == "all":
		return "all"
	}
	return ""
}

// mmqGEnv is MINFER_MMQ_G as a number (0 when unset or not one of mmqGs).
func mmqGEnv() int {
	for _, g := range mmqGs {
		if os.Getenv("MINFER_MMQ_G") == strconv.Itoa(g) {
			return g
		}
	}
	return 0
}

// Switches lists the MINFER_NO_* environment switches and what each turns off.
func Switches() map[string]string {
	return map[string]string{
		"MINFER_NO_MMVQ_MULTIROW":      "matmul: launch the mat-vec kernel once per row instead of once for up to 8 rows",
		"MINFER_NO_GRAPHS":             "CUDA graphs: enqueue every op on every forward instead of replaying a captured graph",
		"MINFER_NO_SEQ_GRAPHS":         "CUDA graphs of batched forwards: enqueue every op of a forward of several sequences instead of replaying a graph captured per batch shape",
		"MINFER_NO_GEMM":               "matmul: no tensor-core GEMM for prefill (the small-nt kernel or chunked mat-vec launches for every nt)",
		"MINFER_NO_MMQ":                "matmul: mat-vec launches in chunks of 8 rows instead of the int8 tensor-core kernel (mmq.cu) where the tier uses it (driver.Tier.MMQRows)",
		"MINFER_MMQ":                   "=all: the int8 tensor-core kernel from 2 rows for every type that has one (for testing and measuring)",
		"MINFER_NO_FUSE_ADD_NORM":      "residual add and the RMSNorm after it as two kernels instead of add_rmsnorm",
		"MINFER_NO_FUSE_ROPE":          "q, k and v mat-vec launches and the RoPE + KV store after them as separate kernels instead of one mmvq_KERNELr launch with both in its epilogue",
		"MINFER_NO_MMVQ_MERGE":         "matmul: one mat-vec launch per weight instead of one for the q, k, v (or gate, up) weights that share an input",
		"MINFER_NO_PDL":                "launches: no programmatic dependent launch (each kernel starts only after the previous one ends)",
		"MINFER_LEDGER":                "=1: profiling mode, graphs off and CUDA events around every kernel (Backend.WriteLedger)",
		"MINFER_MMQ_G":                 "=1, =2, =4 or =8: activation tiles of 8 rows per block of the small-nt tensor-core kernel, instead of the chooser's (for measuring)",
		"MINFER_MMQ_DEFINES":           "=NAME[=VALUE],…: -D defines for mmq.cu, to compare its variants in one binary (for measuring): MMQ_MINB_OFF (no per-type launch bounds), MMQ_MINB8=N / MMQ_MINB16=N (one bound for the kernels of 8 / 16 warps), MMQ_NO_KS (Q4_K decodes its scales per lane again)",
		"MINFER_NO_CUBLAS":             "matmul: minfer's own f16 GEMM kernel (gemm.cu) for prefill even where cuBLAS loads (MINFER_CUBLAS names the library)",
		"MINFER_NO_FLASH":              "attention: the split-K kernels (attn_part + attn_combine) for prefill too, instead of the one-pass tensor-core kernel (attn_flash_f16_*)",
		"MINFER_NO_ATTN_GROUP":         "attention: a split-K block per query head (attn_part_*) for every row count, instead of a block per KV head (attn_part_grp_*) from the tier's AttnGroupRows rows",
		"MINFER_ATTN_GROUP":            "=all: the grouped split-K attention kernels (attn_part_grp_*) from one row (for testing and measuring)",
		"MINFER_NO_FUSE_ATTN_COMBINE":  "attention: the split-K partials merged by a launch of their own (attn_combine) instead of by the last split block of each row and head in the same launch (attn_partc_*)",
		"MINFER_NO_ACT_ROUND":          "matmul: the prefill GEMM rounds activations straight to f16 instead of first to the 8-bit levels the CPU backend gives them for a dot with the weight's type (act_round_*)",
		"MINFER_PAIR_ROWS":             "=all or =none: the mat-vec takes two weight rows per warp at every nt, or at none, instead of where the device tier says (driver.RowPairs)",
		"MINFER_FUSE_MATVEC":           "=1: the one-row fusions of fuse.go (RMSNorm and SwiGLU recomputed in the prologue of the mat-vec that reads them, the residual add in the epilogue of the mat-vec before it); off by default until measured on a GPU (perf-cuda.md v13b)",
		"MINFER_NO_FUSE_NORM_MATVEC":   "one-row RMSNorm launched as its own kernel instead of recomputed in the prologue of each mat-vec launch that reads it (mmvq_KERNELp_1)",
		"MINFER_NO_FUSE_SWIGLU_MATVEC": "one-row SwiGLU launched as its own kernel instead of recomputed in the prologue of the mat-vec launch that reads it (the down projection)",
		"MINFER_NO_FUSE_RESIDUAL":      "one-row residual add held for the next RMSNorm (add_rmsnorm) instead of done in the epilogue of the mat-vec that makes the added rows",
	}
}

// launchSpec is a kernel launch held back; pendingMM is a MatMul whose launches wait
// until the next op that is neither a MatMul nor an AddBias of one of their outputs, so
// the model's "q, k, v = x·W; q, k, v += b" folds the biases into the matmuls'
// epilogues, and mat-vec launches of one x merge (mergeMV): q, k and v become one
// launch, gate and up another. The bias is a generic launch's last argument, a
// mat-vec launch's set's bias.
type launchSpec struct {
	name        string
	grid, block driver.Dim3
	args        []driver.Arg
	bias        bool      // the last argument (or mv's bias) is the bias pointer
	mv          *mvSpec   // a mat-vec launch (mmvq.cu): args are built at flush
	blas        *blasSpec // a cuBLAS GEMM (blas.go): args hold only the bias
}

// mvSpec is a mat-vec launch: one x (its 8-bit form xq/xd or f32 xf) times up to
// mvMaxSets weights.
type mvSpec struct {
	xq, xd, xf   driver.DevicePtr
	cols         int
	rowsPerBlock int // weight rows a block of the kernel takes (warps × rows per warp)
	sets         []mvSet
	kernel       string // mmvq_KERNEL_nt
	nt           int
	pair         bool // the tier lets this kernel and nt take two rows per warp (pairUp)
	// mmq: an mmq.cu launch (nt activation rows in groups activation groups per block of
	// rowsPerBlock weight rows) instead of a mat-vec one.
	mmq    bool
	groups int
	// pro: x is computed in the kernel's prologue (mmvq_KERNELp_1) from its held-back
	// producer, whose outputs this launch also writes when proWrite (fuse.go).
	pro      *pendingPro
	proWrite bool
}

// mvSet is one weight of a mat-vec launch: its arrays, output and row count, the bias
// added in the epilogue and res, a buffer the outputs are added to (the residual add,
// fuse.go), 0 for none.
type mvSet struct {
	q, d, e, dst, bias, res driver.DevicePtr
	rows                    int
}

// mvMaxSets is the number of weight sets an mmvq kernel takes (mmvq.cu MMVQ1).
const mvMaxSets = 3

func (m *mvSpec) args() []driver.Arg {
	a := []driver.Arg{driver.P(m.xq), driver.P(m.xd), driver.P(m.xf), driver.I(m.cols)}
	if m.mmq {
		a = []driver.Arg{driver.P(m.xq), driver.P(m.xd), driver.I(m.cols), driver.I(m.nt), driver.I(m.groups)}
	}
	for i := range mvMaxSets {
		var st mvSet
		if i < len(m.sets) {
			st = m.sets[i]
		}
		a = append(a, driver.P(st.q), driver.P(st.d), driver.P(st.e), driver.P(st.dst), driver.I(st.rows), driver.P(st.bias))
		if !m.mmq {
			a = append(a, driver.P(st.res))
		}
	}
	if m.pro != nil {
		a = append(a, m.pro.args(m.proWrite)...)
	}
	return a
}

type pendingMM struct {
	dst      *Buffer
	nt, rows int
	biased   bool
	launches []launchSpec
}

// flush enqueues the held-back ops in program order: a pending add (it always precedes
// the pending matmuls, since Add flushes them), then the matmuls. The pending matmuls
// are independent (MatMul flushes before one reads another's output), so merging their
// launches keeps the program's meaning.
func (b *Backend) flush() {
	if a := b.padd; a != nil {
		b.padd = nil
		b.launchAdd(*a)
	}
	if pp := b.ppro; pp != nil {
		b.ppro = nil
		if !pp.used {
			b.launch(pp.alone.name, pp.alone.grid, pp.alone.block, 0, pp.alone.args...)
		}
	}
	var ls []launchSpec
	for _, mm := range b.pend {
		ls = append(ls, mm.launches...)
	}
	if !b.sw.noMerge {
		ls = mergeMV(ls)
	}
	pairUp(ls, pairRule{warps: b.tier.MMVQWarps, minBlocks: b.ctx.Props.SMs, force: b.sw.pairRows == "all"})
	for _, l := range ls {
		if l.blas != nil {
			b.launchBLAS(l)
			continue
		}
		args, name, shared := l.args, l.name, 0
		if l.mv != nil {
			args = l.mv.args()
			if l.mv.pro != nil {
				name, shared = proName(name), proShared(l.mv.cols)
			}
		}
		b.launch(name, l.grid, l.block, shared, args...)
	}
	b.pend = b.pend[:0]
}

// mergeMV folds each mat-vec launch into an earlier one of the same kernel, x and
// width while that one has fewer than mvMaxSets weights.
func mergeMV(ls []launchSpec) []launchSpec {
	out := ls[:0:0]
	for _, l := range ls {
		merged := false
		if l.mv != nil {
			for i := range out {
				o := &out[i]
				if o.mv != nil && o.name == l.name && o.mv.xq == l.mv.xq && o.mv.xd == l.mv.xd && o.mv.xf == l.mv.xf &&
					o.mv.cols == l.mv.cols && o.mv.nt == l.mv.nt && o.mv.groups == l.mv.groups && len(o.mv.sets)+len(l.mv.sets) <= mvMaxSets &&
					o.mv.pro == l.mv.pro {
					sets := append(append([]mvSet(nil), o.mv.sets...), l.mv.sets...)
					m := *o.mv
					m.sets = sets
					m.proWrite = o.mv.proWrite || l.mv.proWrite
					o.mv = &m
					o.grid.X = 0
					for _, st := range sets {
						o.grid.X += ceilDiv(st.rows, o.mv.rowsPerBlock) * max(o.mv.groups, 1)
					}
					merged = true
					break
				}
			}
		}
		if !merged {
			out = append(out, l)
		}
	}
	return out
}

// pairRows is the set of nt at which the mat-vec kernel takes two weight rows per warp
// (the tier's, or MINFER_PAIR_ROWS's); kernels without a two-row form get none.
func (b *Backend) pairRows(kernel string) driver.NTSet {
	if k, ok := mvKernelByName(kernel); !ok || !k.pair {
		return 0
	}
	switch b.sw.pairRows {
	case "all":
		return driver.NTs(1, mvMaxNT)
	case "none":
		return 0
	}
	return b.tier.PairRows[kernel]
}

// pairRule says when pairUp pairs a launch's weight rows.
type pairRule struct {
	warps     int  // per block (the tier's MMVQWarps)
	minBlocks int  // the fewest blocks a paired launch may have (the SMs)
	force     bool // pair every allowed launch whatever its size (MINFER_PAIR_ROWS=all)
}

// pairUp turns each mat-vec launch that the tier lets take two weight rows per warp
// into its mmvq_KERNELw form, when that still gives the GPU a block per SM: a small
// launch (a 0.5B model's 896-row matrices) would otherwise leave SMs idle, and loses
// more that way than the halved activation traffic gains. It runs after mergeMV, so a
// merged q, k, v launch is judged by its rows together.
func pairUp(ls []launchSpec, r pairRule) {
	for i := range ls {
		m := ls[i].mv
		if m == nil || !m.pair {
			continue
		}
		blocks := 0
		for _, st := range m.sets {
			blocks += ceilDiv(st.rows, 2*r.warps)
		}
		if !r.force && blocks < r.minBlocks {
			continue
		}
		p := *m
		p.rowsPerBlock = 2 * r.warps
		ls[i].mv = &p
		ls[i].name = fmt.Sprintf("mmvq_%sw_%d", m.kernel, m.nt)
		ls[i].grid.X = blocks
	}
}

func wt(x backend.Weight, what string) *Weight {
	w, ok := x.(*Weight)
	if !ok || w == nil {
		panic(fmt.Sprintf("BUG: cuda: %s: weight %T is not a CUDA weight", what, x))
	}
	if w.q == 0 {
		panic(fmt.Sprintf("BUG: cuda: %s: weight %q used after Free", what, w.name))
	}
	return w
}

func checkNT(nt int, what string) {
	if nt < 1 {
		panic(fmt.Sprintf("BUG: cuda: %s: nt = %d", what, nt))
	}
}

// vec returns a one-row weight's float32 values (pack stores every one-row weight so).
func (b *Backend) vec(x backend.Weight, what string) *Weight {
	w := wt(x, what)
	if w.rows != 1 || w.layout != "f32" {
		panic(fmt.Sprintf("BUG: cuda: %s: weight %q is %d × %d, want one row", what, w.name, w.rows, w.cols))
	}
	return w
}

func flat(n int) (driver.Dim3, driver.Dim3) {
	return driver.Dim3{X: ceilDiv(n, 256)}, driver.Dim3{X: 256}
}

// rowThreads is the block size for a per-row reduction over n values: a function of n
// only, so rows never depend on nt.
func rowThreads(n int) int { return min(1024, max(32, ceilDiv(n, 32)*32)) }

// Embed gathers dequantized table rows; an id outside the table is recorded.
func (b *Backend) Embed(dst backend.Buffer, table backend.Weight, ids backend.Buffer, nt int) {
	checkNT(nt, "Embed")
	w := wt(table, "Embed")
	d, id := f32(dst, nt*w.cols, "Embed dst"), i32(ids, nt, "Embed ids")
	defer b.enter()()
	d.wrote()
	b.launch("embed_"+w.layout, driver.Dim3{X: ceilDiv(w.cols, 256), Y: nt}, driver.Dim3{X: 256}, 0,
		driver.P(w.q), driver.P(w.d), driver.P(w.e), driver.P(id.p), driver.P(d.p), driver.I(w.rows), driver.I(w.cols), driver.P(b.errWord))
}

// RMSNorm: dst = x / sqrt(mean(x²) + eps) * w per row of w.Cols values. A residual add
// into x held back by Add (and not yet launched) fuses with it: add_rmsnorm does both.
func (b *Backend) RMSNorm(dst, x backend.Buffer, w backend.Weight, nt int, eps float32) {
	checkNT(nt, "RMSNorm")
	v := b.vec(w, "RMSNorm")
	xs, ds := f32(x, nt*v.cols, "RMSNorm x"), f32(dst, nt*v.cols, "RMSNorm dst")
	name, args := "rmsnorm", []driver.Arg{driver.P(xs.p)}
	if a := b.padd; a != nil && len(b.pend) == 0 && a.dst == xs && a.n == nt*v.cols && ds != xs {
		b.padd = nil // before enter, whose flush would launch it
		name, args = "add_rmsnorm", append(args, driver.P(a.x.p))
	}
	defer b.enter()()
	if name == "rmsnorm" && nt == 1 && !b.sw.noProNorm && canHold(v.cols, ds, xs, nil) {
		b.holdPro(&pendingPro{kind: proNorm, a: xs.p, b: v.q, eps: eps, n: v.cols, dst: ds})
		if pp := b.ppro; pp != nil {
			pp.alone = launchSpec{name: name, grid: driver.Dim3{X: 1}, block: driver.Dim3{X: rowThreads(v.cols)},
				args: append(args, driver.P(v.q), driver.P(ds.p), driver.I(v.cols), driver.F(eps), driver.P(pp.dq), driver.P(pp.dd))}
		}
		return
	}
	ds.wrote()
	var sq, sd driver.DevicePtr
	if v.cols%32 == 0 {
		sq, sd = b.shadow(ds)
	}
	b.launch(name, driver.Dim3{X: nt}, driver.Dim3{X: rowThreads(v.cols)}, 0,
		append(args, driver.P(v.q), driver.P(ds.p), driver.I(v.cols), driver.F(eps), driver.P(sq), driver.P(sd))...)
	if sq != 0 {
		b.setShadow(ds, nt*v.cols)
	}
}

// HeadNorm: RMSNorm of each head (w.Cols values) of x[nt][heads*w.Cols], in place.
func (b *Backend) HeadNorm(x backend.Buffer, w backend.Weight, nt, heads int, eps float32) {
	checkNT(nt, "HeadNorm")
	v := b.vec(w, "HeadNorm")
	xs := f32(x, nt*heads*v.cols, "HeadNorm x")
	defer b.enter()()
	xs.wrote()
	b.launch("rmsnorm", driver.Dim3{X: nt * heads}, driver.Dim3{X: rowThreads(v.cols)}, 0,
		driver.P(xs.p), driver.P(v.q), driver.P(xs.p), driver.I(v.cols), driver.F(eps), driver.P(0), driver.P(0))
}

// AddBias: x[i] += bias for each of nt rows. When x is the output of a pending
// MatMul of the same shape, the bias is added in that matmul's epilogue instead.
func (b *Backend) AddBias(x backend.Buffer, bias backend.Weight, nt int) {
	checkNT(nt, "AddBias")
	v := b.vec(bias, "AddBias")
	xs := f32(x, nt*v.cols, "AddBias x")
	for i := range b.pend {
		if mm := &b.pend[i]; mm.dst == xs && mm.nt == nt && mm.rows == v.cols && !mm.biased {
			mm.biased = true
			for j := range mm.launches {
				if l := &mm.launches[j]; l.bias {
					if l.mv != nil {
						l.mv.sets[0].bias = v.q
					} else {
						l.args[len(l.args)-1] = driver.P(v.q)
					}
				}
			}
			xs.wrote()
			return
		}
	}
	defer b.enter()()
	xs.wrote()
	g, bl := flat(nt * v.cols)
	b.launch("add_bias", g, bl, 0, driver.P(xs.p), driver.P(v.q), driver.I(nt*v.cols), driver.I(v.cols))
}

// SwiGLU: dst = silu(gate) * up over nt*n values.
func (b *Backend) SwiGLU(dst, gate, up backend.Buffer, nt, n int) {
	checkNT(nt, "SwiGLU")
	d, g, u := f32(dst, nt*n, "SwiGLU dst"), f32(gate, nt*n, "SwiGLU gate"), f32(up, nt*n, "SwiGLU up")
	defer b.enter()()
	if nt == 1 && !b.sw.noProGLU && canHold(n, d, g, u) {
		b.holdPro(&pendingPro{kind: proGLU, a: g.p, b: u.p, n: n, dst: d})
		if pp := b.ppro; pp != nil {
			gr, bl := flat(n)
			pp.alone = launchSpec{name: "swiglu", grid: gr, block: bl,
				args: []driver.Arg{driver.P(d.p), driver.P(g.p), driver.P(u.p), driver.I(n), driver.P(pp.dq), driver.P(pp.dd)}}
		}
		return
	}
	d.wrote()
	var sq, sd driver.DevicePtr
	if n%32 == 0 {
		sq, sd = b.shadow(d)
	}
	gr, bl := flat(nt * n)
	b.launch("swiglu", gr, bl, 0, driver.P(d.p), driver.P(g.p), driver.P(u.p), driver.I(nt*n), driver.P(sq), driver.P(sd))
	if sq != 0 {
		b.setShadow(d, nt*n)
	}
}

// Add: dst[j] += x[j] for j < n.
func (b *Backend) Add(dst, x backend.Buffer, n int) {
	d, xs := f32(dst, n, "Add dst"), f32(x, n, "Add x")
	if n == 0 {
		return
	}
	if b.foldResidual(d, xs, n) {
		return
	}
	defer b.enter()()
	d.wrote()
	if !b.sw.noFuse {
		// Held back: a RMSNorm of dst that follows fuses with it (add_rmsnorm).
		b.padd = &pendingAdd{dst: d, x: xs, n: n}
		return
	}
	b.launchAdd(pendingAdd{dst: d, x: xs, n: n})
}

// pendingAdd is a residual add held back until the next op (see Add and RMSNorm).
type pendingAdd struct {
	dst, x *Buffer
	n      int
}

func (b *Backend) launchAdd(a pendingAdd) {
	g, bl := flat(a.n)
	b.launch("add", g, bl, 0, driver.P(a.dst.p), driver.P(a.x.p), driver.I(a.n))
}

// CopyRows: dst[dstRow*cols:(dstRow+n)*cols] = src[srcRow*cols:(srcRow+n)*cols].
func (b *Backend) CopyRows(dst backend.Buffer, dstRow int, src backend.Buffer, srcRow, n, cols int) {
	if dstRow < 0 || srcRow < 0 || n < 0 || cols < 0 {
		panic(fmt.Sprintf("BUG: cuda: CopyRows(dst row %d, src row %d, n %d, cols %d)", dstRow, srcRow, n, cols))
	}
	if dst == src {
		panic("BUG: cuda: CopyRows: dst is src")
	}
	s, d := f32(src, (srcRow+n)*cols, "CopyRows src"), f32(dst, (dstRow+n)*cols, "CopyRows dst")
	defer b.enter()()
	d.wrote()
	b.fail(b.stream.CopyDtoD(d.at(dstRow*cols), s.at(srcRow*cols), 4*n*cols))
}

// MatMul: dst[nt][w.Rows] = x[nt][w.Cols] · wᵀ with the mat-vec kernels (see package doc).
func (b *Backend) MatMul(dst backend.Buffer, w backend.Weight, x backend.Buffer, nt int) {
	checkNT(nt, "MatMul")
	W := wt(w, "MatMul")
	xs, ds := f32(x, nt*W.cols, "MatMul x"), f32(dst, nt*W.rows, "MatMul dst")
	if xs == ds {
		panic("BUG: cuda: MatMul: dst aliases x")
	}
	// No flush: consecutive matmuls stay pending so the AddBias calls that follow them
	// can fold into their epilogues (see pendingMM).
	defer b.ctx.Enter()()
	if b.padd != nil { // an earlier add: launch it (and nothing else is pending then)
		b.flush()
	}
	for _, mm := range b.pend {
		if mm.dst == xs { // x is still to be written: launch its writer first
			b.flush()
			break
		}
	}
	p := b.planMatMul(W.layout, W.rows, W.cols, nt)
	pro, proWrite := b.takePro(xs, W, nt, p)
	if pro == nil && b.ppro != nil && b.ppro.dst == xs { // x's held producer: launch it (alone or in the earlier readers)
		b.flush()
	}
	ds.wrote()
	if p.path == pathGEMM {
		b.gemm(W, xs, ds, nt, p)
		return
	}
	var xq, xd driver.DevicePtr
	if !wtypeByLayout(W.layout).floatX {
		// x's 8-bit form: from its shadow if a producer (or an earlier matmul) wrote it,
		// else quantized now into the shadow.
		if xq, xd = b.shadow(xs); xq == 0 {
			return
		}
		if !b.shadowValid(xs, nt*W.cols) {
			nblocks := nt * W.cols / 32
			b.launch("quantize_q8", driver.Dim3{X: ceilDiv(nblocks, 8)}, driver.Dim3{X: 256}, 0,
				driver.P(xs.p), driver.P(xq), driver.P(xd), driver.I(nblocks))
			b.setShadow(xs, nt*W.cols)
		}
	}
	mm := pendingMM{dst: ds, nt: nt, rows: W.rows}
	set := mvSet{q: W.q, d: W.d, e: W.e, dst: ds.p, rows: W.rows}
	if p.path == pathMMQ {
		mm.launches = append(mm.launches, launchSpec{name: p.kernel, bias: true,
			grid: driver.Dim3{X: ceilDiv(W.rows, mmqRows) * p.groups}, block: driver.Dim3{X: 32 * mmqWarps(p.g)},
			mv: &mvSpec{xq: xq, xd: xd, cols: W.cols, rowsPerBlock: mmqRows, groups: p.groups, kernel: p.kernel, nt: nt, mmq: true,
				sets: []mvSet{set}}})
		b.pend = append(b.pend, mm)
		return
	}
	warps := b.tier.MMVQWarps
	for r0 := 0; r0 < nt; r0 += p.step {
		n := min(p.step, nt-r0)
		var q, d driver.DevicePtr
		if xq != 0 {
			q, d = xq+driver.DevicePtr(r0*W.cols), xd+driver.DevicePtr(4*r0*W.cols/32)
		}
		set.dst = ds.at(r0 * W.rows)
		mm.launches = append(mm.launches, launchSpec{name: fmt.Sprintf("mmvq_%s_%d", p.kernel, n), bias: true,
			grid: driver.Dim3{X: ceilDiv(W.rows, warps)}, block: driver.Dim3{X: 32 * warps},
			mv: &mvSpec{xq: q, xd: d, xf: xs.at(r0 * W.cols), cols: W.cols, rowsPerBlock: warps, groups: 1,
				kernel: p.kernel, nt: n, pair: b.pairRows(p.kernel).Has(n), sets: []mvSet{set}, pro: pro, proWrite: proWrite}})
	}
	b.pend = append(b.pend, mm)
}

// mmPath is one of MatMul's three ways.
type mmPath int

const (
	pathMV   mmPath = iota // mat-vec launches of up to MMVQMaxRows rows each (mmvq.cu)
	pathMMQ                // the int8 tensor-core kernel for a few rows (mmq.cu)
	pathGEMM               // an f16 copy of the weight, the tiled f16 GEMM (gemm.cu)
)

func (p mmPath) String() string { return [...]string{"mat-vec", "mmq", "gemm"}[p] }

// mmPlan is how MatMul computes one call.
type mmPlan struct {
	path   mmPath
	kernel string // pathMV: the mat-vec kernel (mmvq_KERNEL_n); pathMMQ: the kernel; pathGEMM: the dequant kernel, "" for F16
	step   int    // pathMV: activation rows per launch
	blas   bool   // pathGEMM: cuBLAS (blas.go) instead of gemm_f16w
	g      int    // pathMMQ: activation tiles of 8 rows per block (one of mmqGs)
	groups int    // pathMMQ: activation groups (of g tiles) per weight tile
	// scratch is the device scratch the path needs, in bytes (the GEMM's f16 copy).
	scratch int64
}

// mmqRows is the weight rows of an mmq.cu block (its warps: mmqWarps).
const mmqRows = 16

// planMatMul is MatMul's one chooser (ggml-cuda's habit: the function that picks a path
// also answers whether a path exists and how much scratch it takes): from the weight's
// layout and shape, nt, the device tier and the MINFER_NO_* switches it picks
//   - the GEMM from the tier's GEMMMinRows rows (weights of cols % 32 == 0);
//   - else the int8 tensor-core kernel (mmq.cu) at the tier's MMQRows of the layout and
//     from driver.MMQAllRows rows on, for the types of the table that have one, on
//     sm_80+ (MINFER_MMQ=all: from 2 rows for every such type);
//   - else mat-vec launches of up to MMVQMaxRows rows (one with MINFER_NO_MMVQ_MULTIROW).
//
// The thresholds and their measurements live in the tier table (driver.Tier).
func (b *Backend) planMatMul(layout string, rows, cols, nt int) mmPlan {
	p := planMatMul(b.tier, b.ctx.Props.Major*10+b.ctx.Props.Minor, b.sw, layout, rows, cols, nt)
	p.blas = p.path == pathGEMM && b.blas != nil
	return p
}

func planMatMul(tier driver.Tier, cc int, sw switches, layout string, rows, cols, nt int) mmPlan {
	w := wtypeByLayout(layout)
	if nt >= tier.GEMMMinRows && !sw.noGEMM && cols%32 == 0 {
		p := mmPlan{path: pathGEMM}
		if layout != "f16" {
			p.kernel, p.scratch = "dequant_f16_"+layout, 2*int64(rows)*int64(cols)
		}
		return p
	}
	set, ok := tier.MMQRows[layout]
	if sw.mmqAll && cc >= 80 {
		set, ok = driver.NTs(2, driver.MMQAllRows-1), true
	}
	if ok && w.mmq != "" && (nt >= driver.MMQAllRows || set.Has(nt)) && cc >= 80 && !sw.noMMQ {
		tiles := ceilDiv(nt, 8)
		g := mmqMaxG
		for _, c := range mmqGs { // the fewest tiles that hold nt: one group
			if c >= tiles {
				g = c
				break
			}
		}
		if sw.mmqG > 0 {
			g = sw.mmqG
		}
		return mmPlan{path: pathMMQ, kernel: fmt.Sprintf("mmq_%s_%d", layout, g), g: g, groups: ceilDiv(tiles, g)}
	}
	step := tier.MMVQMaxRows
	if sw.noMultiRow {
		step = 1
	}
	return mmPlan{path: pathMV, kernel: w.mvFor(cols).name, step: step}
}

// gemm queues the tensor-core path: dequantize w to an f16 copy (F16 weights are used
// as they are), round x as the CPU backend rounds it for this weight type (gemmAct),
// then the tiled f16 GEMM (gemm.cu) or cuBLAS's.
func (b *Backend) gemm(W *Weight, xs, ds *Buffer, nt int, p mmPlan) {
	mm := pendingMM{dst: ds, nt: nt, rows: W.rows}
	wf := W.q
	if p.kernel != "" {
		if wf = b.scratchFor("wf16", p.scratch); wf == 0 {
			return
		}
		mm.launches = append(mm.launches, launchSpec{name: p.kernel,
			grid: driver.Dim3{X: W.rows, Y: ceilDiv(W.cols, 2048)}, block: driver.Dim3{X: 256},
			args: []driver.Arg{driver.P(W.q), driver.P(W.d), driver.P(W.e), driver.P(wf), driver.I(W.rows), driver.I(W.cols)}})
	}
	act, blk := gemmAct(W.t, b.sw)
	if p.blas {
		// cuBLAS multiplies f16 by f16: x rounded (and converted) into a scratch.
		xh := b.scratchFor("xf16", 2*int64(nt)*int64(W.cols))
		if xh == 0 {
			return
		}
		if act != "" {
			mm.launches = append(mm.launches, actRoundLaunch(act, blk, xs.p, xh, 0, nt*W.cols))
		} else {
			g, bl := flat(nt * W.cols)
			mm.launches = append(mm.launches, launchSpec{name: "f16_from_f32", grid: g, block: bl, args: []driver.Arg{driver.P(xs.p), driver.P(xh), driver.I(nt * W.cols)}})
		}
		mm.launches = append(mm.launches, launchSpec{name: "cublas_gemm", bias: true, args: []driver.Arg{0},
			blas: &blasSpec{w: wf, x: xh, dst: ds.p, nt: nt, rows: W.rows, cols: W.cols}})
		b.pend = append(b.pend, mm)
		return
	}
	x := xs.p
	if act != "" {
		// gemm_f16w reads f32 and rounds to f16 itself: x rounded into an f32 scratch.
		if x = b.scratchFor("xround", 4*int64(nt)*int64(W.cols)); x == 0 {
			return
		}
		mm.launches = append(mm.launches, actRoundLaunch(act, blk, xs.p, 0, x, nt*W.cols))
	}
	mm.launches = append(mm.launches, launchSpec{name: "gemm_f16w", bias: true,
		grid: driver.Dim3{X: ceilDiv(W.rows, 128), Y: ceilDiv(nt, 128)}, block: driver.Dim3{X: 256},
		args: []driver.Arg{driver.P(wf), driver.P(x), driver.P(ds.p), driver.I(nt), driver.I(W.rows), driver.I(W.cols), 0}})
	b.pend = append(b.pend, mm)
}

// gemmAct is the kernel (gemm.cu act_round_*) that rounds the GEMM's activations to the
// levels the CPU backend quantizes them to for a dot with a weight of type t (its
// vec-dot type, core/quant's Traits.VecDotType), and the values per block: Q8_0 and
// Q8_1 (blocks of 32: Q4_0, Q5_0, Q8_0, Q4_1, …) or Q8_K (256: the K-quants). "" where
// the CPU multiplies in floating point (F32, F16, BF16 weights: x goes straight to f16)
// or MINFER_NO_ACT_ROUND=1. Measured on the trained target (Q4_K_M), eval-prose: the
// CPU's perplexity with x in f32 instead of Q8_K is 28.3256 against its 28.3608, the
// GPU's with x straight to f16 28.3250, so the rounding, not the GEMM, was the 0.126%.
func gemmAct(t quant.Type, sw switches) (kernel string, block int) {
	tr, ok := t.Lookup()
	if !ok || tr.VecDot == nil || sw.noActRound {
		return "", 0
	}
	switch tr.VecDotType {
	case quant.Q8_0, quant.Q8_1:
		return "act_round_q8_0", 32
	case quant.Q8_K:
		return "act_round_q8_k", 256
	}
	return "", 0
}

// actRoundLaunch rounds n values of x (n a multiple of block) with kernel into o16 (f16)
// or, where o16 is 0, o32: one warp per block, 8 warps per CUDA block.
func actRoundLaunch(kernel string, block int, x, o16, o32 driver.DevicePtr, n int) launchSpec {
	nb := n / block
	return launchSpec{name: kernel, grid: driver.Dim3{X: ceilDiv(nb, 8)}, block: driver.Dim3{X: 256},
		args: []driver.Arg{driver.P(x), driver.P(o16), driver.P(o32), driver.I(nb)}}
}
