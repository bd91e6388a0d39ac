// Package cuda is the CUDA implementation of core/backend: buffers in device memory,
// every op a kernel (or a copy) enqueued on one stream, and CUDA graphs per shape
// (backend.Graphs). Kernels come from ../../../cuda/kernels, compiled by NVRTC for the
// device's exact architecture at Open (cached on disk); kernel choices follow the
// device's tier (driver.Tier).
//
// # Numerics
//
// MatMul picks one of three paths per call (planMatMul, from the tier's thresholds). At
// nt = 1 (and for F16/F32 weights up to GEMMMinRows) mat-vec kernels: activations are
// quantized to int8 blocks of 32 with a float scale on the GPU (once per producer:
// RMSNorm, SwiGLU and attention write this 8-bit form beside their output) and dotted
// with dp4a against the quantized weights (every quantized type of the weight-type table,
// types.go); F16, BF16 and F32 weights take float dots with float32 activations. At the tier's MMQRows of the
// layout (Hopper: per nt below 16, e.g. Q4_0 and Q8_0 from 4, Q4_K at 7 and from 9) and
// from 16 to GEMMMinRows - 1 (64) on sm_80+, quantized weights go to the int8 tensor-core kernel
// (mmq.cu, every row of the call in one block per 16 weight rows) with the same 8-bit
// activations (the types with an mmq kernel; the others take mat-vec launches of 8 rows). From GEMMMinRows on, weights are dequantized
// to an f16 copy and multiplied on the tensor cores (f32 accumulation; activations
// rounded to f16, so |x| must stay below 65504): by cuBLAS where libcublas loads
// (blas.go), else by gemm.cu's mma.sync kernel. Matrices of a type without kernels
// (IQ1_S, IQ1_M) are held as F16 copies (NewWeight warns). Results track the CPU backend within the bounds stated
// in the tests, not bit for bit (the CPU uses Q8_K activations for K-quants and ggml's
// summation orders).
//
// Some ops are held back and fused with the next one: a MatMul's launch waits for an
// AddBias of its output (the bias joins its epilogue), a residual Add waits for the
// RMSNorm of its output (add_rmsnorm). Every other op launches what is held back
// first, so the stream keeps program order.
//
// # Row identity
//
// Every kernel computes a row with the same operations whatever nt is: the mat-vec
// kernels serve nt ≤ 8 in one launch and larger nt in chunks of 8 with the same per-row
// code; the tensor-core kernel for a few rows (mmq.cu) sums every output in the mat-vec
// kernels' order with their rounding (common.cuh fold1/foldk), so its rows have the bits
// of a 1-row mat-vec call; attention splits the cache in chunks fixed by the cache size,
// and norms pick their block size from the row length. So rows are bitwise for every nt
// below GEMMMinRows; the GEMM and the prefill attention (attn.cu attn_flash_f16_*, one
// pass over 64-position tiles with online softmax on the tensor cores, f16 cache,
// from GEMMMinRows rows) are not. Caps().IdentityRows declares GEMMMinRows - 1 of the
// tier (64 on sm_80+, 39 on Turing), which TestMatMulRowIdentity and the conformance
// kit check up to that bound.
//
// # Threads
//
// Every method locks its goroutine to the OS thread for its duration and makes the
// context current, so the engine may call from any goroutine (one at a time).
package cuda

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/quant"
	"github.com/minfer/minfer/cuda/driver"
)

// Options configure Open.
type Options struct {
	Device   int       // CUDA device ordinal
	Log      io.Writer // progress lines (kernel compiles, uploads, VRAM); nil = quiet
	CacheDir string    // NVRTC cache ("" = driver.DefaultCacheDir())
	// Tier overrides the device tier by name or compute capability ("" = the
	// MINFER_DEVICE_TIER environment variable, else the device's own).
	Tier string
	// ReserveBytes is device memory kept free for scratch and graphs when checking
	// that weights and caches fit (0 = 512 MiB).
	ReserveBytes int64
}

// Backend runs core/backend's ops on one CUDA device. Make one with Open.
type Backend struct {
	ctx    *driver.Context
	stream *driver.Stream
	tier   driver.Tier
	log    io.Writer
	l      driver.Launcher

	mods []*driver.Module
	fns  map[string]*driver.Function

	err     error
	errWord driver.DevicePtr // 2 int32: code, detail (set by kernels; see common.cuh)
	attnCnt driver.DevicePtr // attnCounters zero int32s: attn_partc_*'s arrivals per row and head
	// attnShared is the dynamic shared memory every split-K attention kernel may take
	// (loadKernels: the device's opt-in limit less the kernel's static shared memory).
	attnShared int
	// host is pinned memory for what crosses to the host at a sync: the error word's
	// copy in its first hostData bytes, ReadF32's data after it (grown on demand).
	host   *driver.HostMem
	closed bool

	warned   map[quant.Type]bool        // types whose kernel-less fallback NewWeight reported
	allocs   map[driver.DevicePtr]int64 // every live allocation, freed by Close
	reserve  int64
	uploaded int64

	scratch map[string]*scratch // grown on demand, old ones retired (graphs may use them)
	retired []driver.DevicePtr

	graphs    map[string]*driver.Graph
	capturing bool
	sw        switches
	epoch     uint64 // bumped at graph capture start/end and replay (see Buffer)
	led       ledger
	pend      []pendingMM   // matmuls not yet launched (see flush)
	blas      *driver.BLAS  // the prefill GEMM's cuBLAS handle; nil: gemm_f16w (blas.go)
	padd      *pendingAdd   // a residual add not yet launched
	ppro      *pendingPro   // a one-row RMSNorm or SwiGLU not yet launched (fuse.go)
	seqTabs   seqTables     // the *_seqs launches' uploaded tables (attnseqs.go)
	seqG      seqGraphState // RunSeqs' graphs (seqgraph.go)
}

var (
	_ backend.Backend = (*Backend)(nil)
	_ backend.Graphs  = (*Backend)(nil)
)

var (
	availOnce   sync.Once
	availOK     bool
	availReason string
)

// Available reports whether a usable CUDA device is present; reason says why not (or
// names the device). It loads the driver and NVRTC but compiles nothing.
func Available() (bool, string) {
	availOnce.Do(func() {
		availOK, availReason = probe()
	})
	return availOK, availReason
}

func probe() (bool, string) {
	n, err := driver.DeviceCount()
	if err != nil {
		return false, err.Error()
	}
	if n == 0 {
		return false, "cuda: no CUDA device found"
	}
	c, err := driver.NewContext(0)
	if err != nil {
		return false, err.Error()
	}
	defer c.Close()
	if _, err := driver.SelectTier(c.Props.Major, c.Props.Minor, driver.EnvTier()); err != nil {
		return false, err.Error()
	}
	if _, _, err := driver.NVRTCVersion(); err != nil {
		return false, err.Error()
	}
	return true, fmt.Sprintf("%s (compute %d.%d, %.1f GiB)", c.Props.Name, c.Props.Major, c.Props.Minor, float64(c.Props.TotalMem)/(1<<30))
}

// Open initialises the device, compiles (or loads from cache) every kernel and makes
// the stream. Errors name the missing piece (driver, NVRTC, device, compile).
func Open(opts Options) (*Backend, error) {
	if err := driver.Init(); err != nil {
		return nil, err
	}
	ctx, err := driver.NewContext(opts.Device)
	if err != nil {
		return nil, err
	}
	override := opts.Tier
	if override == "" {
		override = driver.EnvTier()
	}
	tier, err := driver.SelectTier(ctx.Props.Major, ctx.Props.Minor, override)
	if err != nil {
		ctx.Close()
		return nil, err
	}
	b := &Backend{ctx: ctx, tier: tier, log: opts.Log, fns: map[string]*driver.Function{},
		allocs: map[driver.DevicePtr]int64{}, scratch: map[string]*scratch{}, graphs: map[string]*driver.Graph{},
		reserve: opts.ReserveBytes, sw: readSwitches(), led: ledger{on: ledgerOn()}}
	if p := b.sw.pairRows; p != "" && p != "all" && p != "none" {
		ctx.Close()
		return nil, fmt.Errorf("cuda: MINFER_PAIR_ROWS=%q: want all, none or unset", p)
	}
	if b.led.on {
		b.sw.noGraphs = true // one launch per op, each timed
	}
	// Under the ledger each kernel sits between two events, so PDL could not overlap
	// anything there.
	b.l.PDL = tier.PDL && driver.PDLSupported() && !b.sw.noPDL && !b.led.on
	if b.log == nil {
		b.log = io.Discard
	}
	if b.reserve <= 0 {
		b.reserve = 512 << 20
	}
	leave := ctx.Enter()
	defer leave()
	if err := b.init(opts); err != nil {
		b.closeLocked()
		return nil, err
	}
	return b, nil
}

func (b *Backend) init(opts Options) error {
	var err error
	if b.stream, err = driver.NewStream(); err != nil {
		return err
	}
	if err := b.loadKernels(opts.CacheDir); err != nil {
		return err
	}
	b.initBLAS()
	if b.errWord, err = b.alloc("error word", 8); err != nil {
		return err
	}
	if err := b.stream.Memset32(b.errWord, 0, 2); err != nil {
		return err
	}
	if b.attnCnt, err = b.alloc("attention counters", 4*attnCounters); err != nil {
		return err
	}
	if err := b.stream.Memset32(b.attnCnt, 0, attnCounters); err != nil {
		return err
	}
	b.growHost(hostData + 64<<10)
	free, total, _ := b.ctx.MemInfo()
	pdl := ""
	if b.l.PDL {
		pdl = ", PDL on"
	}
	fmt.Fprintf(b.log, "cuda: %s, compute %d.%d (tier %s%s), %d SMs, %.1f of %.1f GiB free\n",
		b.ctx.Props.Name, b.ctx.Props.Major, b.ctx.Props.Minor, b.tier.Name, pdl, b.ctx.Props.SMs,
		float64(free)/(1<<30), float64(total)/(1<<30))
	return b.stream.Synchronize()
}

// Name is "cuda".
func (b *Backend) Name() string { return "cuda" }

// Caps declares row identity up to the tier's GEMMMinRows - 1 rows (see the package
// comment); ops are queued on the stream.
func (b *Backend) Caps() backend.Caps {
	return backend.Caps{IdentityRows: b.tier.GEMMMinRows - 1, Queued: true}
}

// Props are the device's properties; Tier the kernel choices in use.
func (b *Backend) Props() driver.Props { return b.ctx.Props }

// Tier is the device tier in use.
func (b *Backend) Tier() driver.Tier { return b.tier }

// Uploaded is the number of weight bytes resident on the device.
func (b *Backend) Uploaded() int64 { return b.uploaded }

// enter makes the context current on this goroutine's thread until the returned
// function runs.
// Every op but MatMul and a folded AddBias enters here, which first launches the
// pending matmuls, keeping the stream in program order.
func (b *Backend) enter() func() {
	if b.closed {
		panic("BUG: cuda: backend used after Close")
	}
	leave := b.ctx.Enter()
	b.flush()
	return leave
}

func (b *Backend) fail(err error) {
	if err != nil && b.err == nil {
		b.err = err
	}
}

func (b *Backend) failf(format string, args ...any) {
	b.fail(fmt.Errorf("cuda: "+format, args...))
}

// takeErr synchronises the stream, folds in errors the kernels reported and returns
// (and clears) the first pending error.
func (b *Backend) takeErr() error {
	if b.capturing {
		b.failf("synchronising call inside a graph capture")
	} else {
		// The error word's copy is enqueued before the wait, so one synchronisation
		// covers the work, the word and whatever ReadF32 enqueued before calling here.
		var w [8]byte
		copied := b.host != nil && b.stream.CopyDtoH(b.host.Ptr(0), b.errWord, 8) == nil
		if err := b.stream.Synchronize(); err != nil {
			b.fail(err)
		}
		b.settle()
		if b.err == nil {
			if copied {
				copy(w[:], b.host.Bytes()[:8])
			} else if err := driver.CopyDtoH(w[:], b.errWord); err != nil {
				b.fail(err)
			}
		}
		if b.err == nil {
			if code := int32(le32(w[:4])); code != 0 {
				detail := int32(le32(w[4:]))
				switch code {
				case 1:
					b.failf("Embed: token id %d outside the table", detail)
				case 2:
					b.failf("RoPEStoreKV: position %d outside the cache", detail)
				case 3:
					b.failf("Attention: position %d outside the cache", detail)
				default:
					b.failf("kernel error %d (detail %d)", code, detail)
				}
				b.fail(b.stream.Memset32(b.errWord, 0, 2))
			}
		}
	}
	err := b.err
	b.err = nil
	return err
}

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

// Sync waits for all enqueued work and returns the first pending error.
func (b *Backend) Sync() error {
	if b.closed {
		return errClosed
	}
	defer b.enter()()
	return b.takeErr()
}

var errClosed = errors.New("cuda: backend is closed")

// Close frees every allocation, graph, module and the stream, and releases the context.
func (b *Backend) Close() error {
	if b.closed {
		return nil
	}
	leave := b.ctx.Enter()
	defer leave()
	b.flush()
	return b.closeLocked()
}

func (b *Backend) closeLocked() error {
	var errs []error
	if b.stream != nil {
		errs = append(errs, b.stream.Synchronize())
	}
	errs = append(errs, b.blas.Destroy())
	b.blas = nil
	for k, g := range b.graphs {
		errs = append(errs, g.Destroy())
		delete(b.graphs, k)
	}
	for k, g := range b.seqG.graphs {
		errs = append(errs, g.g.Destroy())
		delete(b.seqG.graphs, k)
	}
	for p := range b.allocs {
		errs = append(errs, driver.Free(p))
	}
	errs = append(errs, b.host.Free())
	b.host = nil
	for _, p := range b.retired {
		errs = append(errs, driver.Free(p))
	}
	b.allocs, b.retired = nil, nil
	for _, m := range b.mods {
		errs = append(errs, m.Unload())
	}
	if b.stream != nil {
		errs = append(errs, b.stream.Destroy())
	}
	errs = append(errs, b.ctx.Close())
	b.closed = true
	return errors.Join(errs...)
}

// alloc takes n bytes of device memory after checking they fit with the reserve kept
// free; what names the allocation in errors.
func (b *Backend) alloc(what string, n int64) (driver.DevicePtr, error) {
	free, total, err := b.ctx.MemInfo()
	if err != nil {
		return 0, err
	}
	if n+b.reserve > free {
		return 0, fmt.Errorf("cuda: %s needs %.1f MiB but only %.1f MiB of %.1f MiB device memory is free (%.0f MiB kept in reserve)",
			what, mib(n), mib(free), mib(total), mib(b.reserve))
	}
	p, err := driver.Alloc(n)
	if err != nil {
		return 0, fmt.Errorf("cuda: %s: %w", what, err)
	}
	b.allocs[p] = n
	return p, nil
}

func (b *Backend) free(p driver.DevicePtr) {
	if _, ok := b.allocs[p]; !ok {
		return
	}
	delete(b.allocs, p)
	b.fail(driver.Free(p))
}

// hostData is the offset of ReadF32's data in b.host (the error word sits before it).
const hostData = 64

// growHost makes b.host hold at least n bytes, replacing it (no copy can be pending on
// it: every use waits for the stream). Without pinned memory (allocation refused) b.host
// stays as it was; callers then take the synchronous paths.
func (b *Backend) growHost(n int) {
	if b.host != nil && b.host.Len() >= n {
		return
	}
	size := max(n, 1<<20)
	if b.host != nil {
		size = max(n, 2*b.host.Len())
	}
	h, err := driver.HostAlloc(size)
	if err != nil {
		return
	}
	if b.host != nil {
		b.fail(b.host.Free())
	}
	b.host = h
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// OpenBackend is Open returning the backend.Backend interface: nil (not a nil *Backend)
// on error, for callers that choose between backends.
func OpenBackend(opts Options) (backend.Backend, error) {
	b, err := Open(opts)
	if err != nil {
		return nil, err
	}
	return b, nil
}
