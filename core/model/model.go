// Package model holds the architectures minfer runs (llama, qwen2, qwen3), each written
// once against the ops of core/backend, and the explicit weight loader that binds a GGUF
// file's tensors to them.
//
// A Model is one loaded file on one backend, its weights namespaced ("target/…",
// "draft/…") so two models can share a backend. Forward runs a batch of tokens at the
// next positions of a KV cache and returns logits. A Model is used by one goroutine at a
// time (its scratch buffers are shared by all its forwards).
package model

import (
	"errors"
	"fmt"
	"math/bits"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/gguf"
	"github.com/minfer/minfer/core/kv"
	"github.com/minfer/minfer/core/quant"
)

// arch is one architecture: its RoPE mode, the tensors it reads and its forward pass.
type arch struct {
	rope    backend.RoPEMode
	specs   func(p *Params, w *Weights) []tensorSpec
	forward func(b backend.Backend, p *Params, w *Weights, s *pass)
}

var archs = map[string]*arch{}

// Archs lists the supported architecture names.
func Archs() []string {
	names := make([]string, 0, len(archs))
	for n := range archs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Options configure Load.
type Options struct {
	// Name namespaces the weights on the backend ("target", "draft"); default "model".
	Name string
	// Progress, if non-nil, is called as weights load with bytes done and total.
	Progress func(done, total int64)
}

// Model is a loaded model. It keeps the GGUF file open (the CPU backend reads weights
// straight from its memory map) until Close.
type Model struct {
	Name   string
	Params Params
	W      Weights
	// WeightBytes is the size of all tensors the model uses.
	WeightBytes int64

	b       backend.Backend
	f       *gguf.File
	arch    *arch
	scratch map[int]*pass // by capacity (a power of two ≥ nt)
	seqs    []seqRows     // ForwardBatch's sequences' places in the batch (reused)
	last    *batchOut     // ForwardBatch's logits
	graphs  backend.Graphs
	chain   chainState // DraftChain's picks record
	serial  uint64     // unique in the process (ForwardBatch's graph keys)
}

// serials numbers the models loaded in this process.
var serials atomic.Uint64

// Load reads the hyperparameters and weights of f onto b. The model takes ownership of
// f (Close closes it, also when Load fails). Errors name the missing tensors, the
// tensor with a wrong shape or type, or the bad metadata key.
func Load(b backend.Backend, f *gguf.File, opt Options) (m *Model, err error) {
	defer func() {
		if err != nil {
			f.Close()
		}
	}()
	if len(f.Tensors) == 0 {
		return nil, errors.New("model: the file has no tensors (a vocabulary-only GGUF?); it can be tokenized with, not run")
	}
	name := f.Arch()
	a, ok := archs[name]
	if name == "" {
		return nil, errors.New("model: no general.architecture key (or not a string): not a model file")
	}
	if !ok {
		return nil, fmt.Errorf("model: unknown architecture %s (supported: %s)", gguf.Quote(name), strings.Join(Archs(), ", "))
	}
	p, err := readParams(f, name, a.rope)
	if err != nil {
		return nil, err
	}
	te, ok := f.Tensor("token_embd.weight")
	if !ok {
		return nil, errors.New("model: 1 required tensor(s) missing: token_embd.weight")
	}
	if len(te.Dims) != 2 || te.Dims[1] == 0 || te.Dims[1] > 1<<24 {
		return nil, fmt.Errorf("model: tensor \"token_embd.weight\": shape %v, want [%d, vocab]", te.Dims, p.Embd)
	}
	p.Vocab = int(te.Dims[1])
	if p.Layers > len(f.Tensors) { // each layer has several tensors: a bogus count, not a model
		return nil, fmt.Errorf("model: %s.block_count %d exceeds the file's %d tensors", name, p.Layers, len(f.Tensors))
	}
	if v, err := f.GetUint(name + ".vocab_size"); err == nil && int(v) != p.Vocab {
		return nil, fmt.Errorf("model: %s.vocab_size %d != token_embd rows %d", name, v, p.Vocab)
	}
	if opt.Name == "" {
		opt.Name = "model"
	}
	m = &Model{Name: opt.Name, Params: p, b: b, f: f, arch: a, scratch: map[int]*pass{}, serial: serials.Add(1)}
	m.W.Layers = make([]Layer, p.Layers)
	if m.WeightBytes, err = loadWeights(b, f, opt.Name, a.specs(&m.Params, &m.W), opt.Progress); err != nil {
		return nil, err
	}
	if m.W.Output == nil {
		m.W.Output = m.W.TokEmbd
		m.Params.TiedOutput = true
	}
	if m.W.RopeFreq != nil {
		if m.Params.Rope.FreqFactors, err = readVector(f, "rope_freqs.weight"); err != nil {
			m.free()
			return nil, err
		}
	}
	if g, ok := b.(backend.Graphs); ok {
		m.graphs = g
	}
	return m, nil
}

// graphRows is the largest forward the model captures a graph for.
const graphRows = 64

// CapturesGraphs reports whether the model's forwards of up to graphRows tokens are
// captured once per shape (batch size, cache, all rows or the last) and replayed after:
// the first forward of each shape then costs a capture.
func (m *Model) CapturesGraphs() bool { return m.graphs != nil }

// readVector copies an F32 vector tensor to the host.
func readVector(f *gguf.File, name string) ([]float32, error) {
	ti, _ := f.Tensor(name)
	out := make([]float32, ti.Elements())
	if err := quant.Dequantize(ti.Type, out, f.TensorData(ti)); err != nil {
		return nil, fmt.Errorf("model: tensor %q: %w", name, err)
	}
	return out, nil
}

// File is the GGUF file the model was loaded from (tokenizer metadata lives there).
func (m *Model) File() *gguf.File { return m.f }

// Backend is the backend the weights live on.
func (m *Model) Backend() backend.Backend { return m.b }

// NewKV allocates a KV cache for one sequence of this model: ctx positions (0 = the
// model's training context) of element type t.
func (m *Model) NewKV(ctx int, t backend.KVType) (*kv.Cache, error) {
	if ctx <= 0 {
		ctx = m.Params.CtxTrain
	}
	return kv.New(m.b, m.KVSpec(ctx, t))
}

// NewBlocks allocates an arena of blocks KV blocks of block positions of element type t
// for this model's paged caches (kv.Blocks): on a backend that pages (backend.Pager,
// the CPU); elsewhere an error.
func (m *Model) NewBlocks(block, blocks int, t backend.KVType) (*kv.Blocks, error) {
	p, ok := m.b.(backend.Pager)
	if !ok {
		return nil, fmt.Errorf("model %s: the %s backend keeps whole KV caches (no paging)", m.Name, m.b.Name())
	}
	return kv.NewBlocks(p, m.KVSpec(block, t), block, blocks)
}

// KVSpec is the cache shape this model needs for ctx positions.
func (m *Model) KVSpec(ctx int, t backend.KVType) backend.KVSpec {
	p := &m.Params
	return backend.KVSpec{Layers: p.Layers, KVHeads: p.KVHeads, HeadDim: p.HeadDim, Ctx: ctx, Type: t}
}

// Logits are the result of a forward: Rows rows of Cols (= vocab) float32 in Buf, valid
// until the model's next Forward.
type Logits struct {
	Buf        backend.Buffer
	Rows, Cols int
}

// Forward runs ids at positions c.Len(), c.Len()+1, … of cache c, appends them to c and
// returns the logits of every row (all) or of the last row only. Row i of an all-rows
// forward has exactly the bits of a one-token forward of ids[i] (the backend's row
// identity). On error (an id outside the vocabulary, a full cache, a backend failure)
// the cache length is unchanged.
func (m *Model) Forward(ids []int32, c *kv.Cache, all bool) (Logits, error) {
	return m.forward(ids, c, all, true)
}

// ForwardNoWait is Forward without waiting for the backend to finish: the work is
// enqueued, c is appended at once, and an error the backend reports during the work
// surfaces at the ReadLogits or RowStats that must follow (one wait instead of two per
// step on a GPU). When that read fails, the caller truncates c back to its length
// before the call, which restores Forward's rule that a failed forward leaves the
// cache unchanged. Errors found before anything is enqueued (ids, cache room) are
// returned here, with c unchanged.
func (m *Model) ForwardNoWait(ids []int32, c *kv.Cache, all bool) (Logits, error) {
	return m.forward(ids, c, all, false)
}

// Check reports what a forward of ids on c would refuse before running anything: no
// tokens, an id outside the vocabulary, a cache of another model's shape, or no room.
func (m *Model) Check(ids []int32, c *kv.Cache) error {
	if len(ids) == 0 {
		return errors.New("model: forward of no tokens")
	}
	for _, id := range ids {
		if id < 0 || int(id) >= m.Params.Vocab {
			return fmt.Errorf("model: token id %d outside the vocabulary [0, %d)", id, m.Params.Vocab)
		}
	}
	spec := c.Spec()
	if want := m.KVSpec(spec.Ctx, spec.Type); spec != want {
		return fmt.Errorf("BUG: model %s: cache shape %+v does not fit (want %+v)", m.Name, spec, want)
	}
	return c.Check(len(ids))
}

func (m *Model) forward(ids []int32, c *kv.Cache, all, wait bool) (Logits, error) {
	if err := m.Check(ids, c); err != nil {
		return Logits{}, err
	}
	return m.run(ids, len(ids), c, all, wait)
}

// run is forward after Check; ids nil is a one-token forward (nt 1) whose token and
// position are already in the one-row scratch's ids, pos and posl buffers (a draft
// chain's step: DraftChain put them there on the device).
func (m *Model) run(ids []int32, nt int, c *kv.Cache, all, wait bool) (Logits, error) {
	if err := c.Prepare(nt); err != nil { // a paged cache's blocks for these positions
		return Logits{}, fmt.Errorf("model %s: forward of %d tokens: %w", m.Name, nt, err)
	}
	s, err := m.pass(nt, all)
	if err != nil {
		return Logits{}, err
	}
	pos0 := c.Len()
	for i := range nt {
		s.hostPos[i] = int32(pos0 + i)
	}
	if ids != nil {
		m.b.WriteI32(s.ids, 0, ids)
		m.b.WriteI32(s.pos, 0, s.hostPos[:nt])
		m.b.WriteI32(s.posl, 0, s.hostPos[nt-1:nt])
	}
	s.nt, s.all, s.kv = nt, all, c.Device()
	run := func() { m.arch.forward(m.b, &m.Params, &m.W, s) }
	if m.graphs != nil {
		// Forwards of up to graphRows tokens (decode, verify, draft catch-up) are
		// launch-bound and replay a graph captured per shape; longer ones (prefill
		// chunks of any length) are run directly: a graph per prompt length would cost
		// a capture on almost every request and keep growing.
		key := ""
		if nt <= graphRows {
			key = fmt.Sprintf("%s/kv%d/nt%d/all=%t", m.Name, c.ID(), nt, all)
		}
		err = m.graphs.Run(key, run)
	} else {
		run()
	}
	if err == nil && wait {
		err = m.b.Sync()
	}
	if err != nil {
		return Logits{}, fmt.Errorf("model %s: forward of %d tokens at %d: %w", m.Name, nt, pos0, err)
	}
	if err := c.Append(nt); err != nil {
		return Logits{}, err
	}
	rows := 1
	if all {
		rows = nt
	}
	return Logits{Buf: s.logits(all), Rows: rows, Cols: m.Params.Vocab}, nil
}

// ReadLogits copies l's rows into dst (len ≥ Rows*Cols) on the host.
func (m *Model) ReadLogits(l Logits, dst []float32) error {
	return m.b.ReadF32(l.Buf, 0, dst[:l.Rows*l.Cols])
}

// RowStats summarise the rows of a forward's logits where they live (see
// backend.RowStatser): row r's K best logits, best first, ties to the lower id, are
// IDs[r*K:(r+1)*K] and Vals[r*K:(r+1)*K]; Max[r] is its largest logit, LSE[r] log Σ exp
// over the whole row and Picked[r] the logit of the column asked for (0 for none).
type RowStats struct {
	K                int
	IDs              []int32
	Vals             []float32
	Max, LSE, Picked []float32
}

// HasRowStats reports whether the backend computes RowStats without reading the rows.
func (m *Model) HasRowStats() bool {
	_, ok := m.b.(backend.RowStatser)
	return ok
}

// ErrNoRowStats is returned by Model.RowStats on a backend without backend.RowStatser.
var ErrNoRowStats = errors.New("model: the backend does not compute row statistics")

// RowStats fills st (reusing its slices) with the statistics of l's rows: the k best
// candidates (0 ≤ k ≤ Cols) and, for every row r, the max, log-sum-exp and the logit of
// column pick[r] (pick[r] < 0: none; len(pick) ≥ l.Rows, or nil for no picks). Like
// ReadLogits it is valid until the model's next Forward.
func (m *Model) RowStats(l Logits, k int, pick []int32, st *RowStats) error {
	rs, ok := m.b.(backend.RowStatser)
	if !ok {
		return ErrNoRowStats
	}
	nt := l.Rows
	if pick == nil {
		pick = noPicks(nt)
	}
	st.K = k
	st.IDs, st.Vals = grow(st.IDs, nt*k), grow(st.Vals, nt*k)
	st.Max, st.LSE, st.Picked = grow(st.Max, nt), grow(st.LSE, nt), grow(st.Picked, nt)
	if err := rs.RowStats(l.Buf, nt, l.Cols, k, pick, st.IDs, st.Vals, st.Max, st.LSE, st.Picked); err != nil {
		return fmt.Errorf("model %s: row statistics of %d rows: %w", m.Name, nt, err)
	}
	return nil
}

// somePicks is a read-only pick list of "none" for the usual few rows (a draft step,
// a verify round), so RowStats without picks allocates nothing there.
var somePicks = newNoPicks(64)

// noPicks is a pick list of n "none" entries (backends only read it).
func noPicks(n int) []int32 {
	if n <= len(somePicks) {
		return somePicks[:n:n]
	}
	return newNoPicks(n)
}

func newNoPicks(n int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = -1
	}
	return p
}

// grow returns s resliced to n elements, reallocated when its capacity is short.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// Close frees the weights and scratch buffers and closes the file.
func (m *Model) Close() error {
	if m.arch == nil {
		return nil
	}
	m.free()
	m.arch = nil
	return m.f.Close()
}

// free releases every weight and scratch buffer.
func (m *Model) free() {
	seen := map[backend.Weight]bool{}
	put := func(w backend.Weight) {
		if w != nil && !seen[w] {
			seen[w] = true
			m.b.Free(w)
		}
	}
	put(m.W.TokEmbd)
	put(m.W.OutNorm)
	put(m.W.Output)
	put(m.W.RopeFreq)
	for _, L := range m.W.Layers {
		for _, w := range []backend.Weight{L.AttnNorm, L.Wq, L.Wk, L.Wv, L.Bq, L.Bk, L.Bv,
			L.QNorm, L.KNorm, L.Wo, L.FFNNorm, L.Gate, L.Up, L.Down} {
			put(w)
		}
	}
	for _, s := range m.scratch {
		s.free(m.b)
	}
	m.scratch = map[int]*pass{}
	if m.last != nil {
		m.b.Free(m.last.logits)
		m.last = nil
	}
	m.chain.free(m.b)
}

// pass is the scratch state of a forward over up to cap rows. Shapes are given per
// row; every buffer holds cap rows.
type pass struct {
	cap    int
	nt     int
	all    bool
	kv     backend.KV
	ids    backend.Buffer // I32 (cap)
	pos    backend.Buffer // I32 (cap)
	x      backend.Buffer // (cap, embd) residual stream
	xb     backend.Buffer // (cap, embd) normed input / block output
	q, att backend.Buffer // (cap, qdim)
	k, v   backend.Buffer // (cap, kvdim)
	gate   backend.Buffer // (cap, ff)
	up     backend.Buffer // (cap, ff)
	act    backend.Buffer // (1, ff) a one-row forward's SwiGLU
	xl     backend.Buffer // (1, embd) last row
	ql     backend.Buffer // (1, qdim) last row's query
	posl   backend.Buffer // I32 (1) last row's position
	out1   backend.Buffer // (1, vocab)
	outAll backend.Buffer // (cap, vocab), allocated on first all-rows forward

	hostPos []int32
	bufs    []backend.Buffer
	// seqs, set by ForwardBatch, places each sequence's rows in the batch (nil: one
	// sequence, kv); last then receives the logits of the nOut rows that get them,
	// whose residual rows xo (cap, embd) gathers in the last layer when nOut < nt.
	seqs []seqRows
	last *batchOut
	nOut int
	xo   backend.Buffer
	// ma runs the batch's attention; multi holds its sequences' arguments.
	ma    backend.MultiAttention
	multi []backend.SeqAttention
}

func (s *pass) logits(all bool) backend.Buffer {
	if all {
		return s.outAll
	}
	return s.out1
}

// rows is the part of a forward's batch that the rest of a layer computes: every
// row, or after narrow in the last layer of a last-row-only forward, just the last.
type rows struct {
	n      int
	x, q   backend.Buffer // residual (n, embd), rotated queries (n, qdim)
	pos    backend.Buffer // I32 (n)
	narrow bool
}

// all returns the whole batch.
func (s *pass) rows() rows { return rows{n: s.nt, x: s.x, q: s.q, pos: s.pos} }

// narrow, in the last layer of a forward that only needs the last row's logits and
// after every row's K/V is stored, keeps just the last row: attention, output
// projection and feed-forward then run for one row instead of nt (llama.cpp does the
// same with inp_out_ids). Row identity makes the result the same bits.
func (s *pass) narrow(b backend.Backend, p *Params, l int, r rows) rows {
	if s.all || s.nt == 1 || l != p.Layers-1 {
		return r
	}
	b.CopyRows(s.xl, 0, s.x, s.nt-1, 1, p.Embd)   // xl (1, embd)
	b.CopyRows(s.ql, 0, s.q, s.nt-1, 1, p.QDim()) // ql (1, qdim)
	return rows{n: 1, x: s.xl, q: s.ql, pos: s.posl, narrow: true}
}

// classify applies the output norm and the classifier to the rows asked for: every
// row into outAll, or the last row into out1.
func (s *pass) classify(b backend.Backend, p *Params, w *Weights, r rows) {
	if s.last != nil { // a batch of sequences: the rows their Outs ask for
		b.RMSNorm(s.xb, r.x, w.OutNorm, r.n, p.RMSEps) // xb (nOut, embd)
		b.MatMul(s.last.logits, w.Output, s.xb, r.n)   // logits (nOut, vocab)
		return
	}
	if s.all {
		b.RMSNorm(s.xb, r.x, w.OutNorm, r.n, p.RMSEps) // xb (nt, embd)
		b.MatMul(s.outAll, w.Output, s.xb, r.n)        // logits (nt, vocab)
		return
	}
	x := s.xl // narrowed: the last row is in xl
	if !r.narrow {
		x = r.x // a one-row forward: the last row is the only one
	}
	b.RMSNorm(s.xl, x, w.OutNorm, 1, p.RMSEps) // xl (1, embd)
	b.MatMul(s.out1, w.Output, s.xl, 1)        // logits (1, vocab)
}

func (s *pass) free(b backend.Backend) {
	for _, x := range s.bufs {
		b.Free(x)
	}
	s.bufs = nil
}

// pass returns the scratch for nt rows, making it on first use. Capacities are powers
// of two so a handful of scratch sets serve every batch size.
func (m *Model) pass(nt int, all bool) (*pass, error) {
	c := 1 << bits.Len(uint(nt-1))
	s := m.scratch[c]
	if s == nil {
		s = &pass{cap: c, hostPos: make([]int32, c)}
		p := &m.Params
		var err error
		f32 := func(n int) backend.Buffer {
			if err != nil {
				return nil
			}
			var buf backend.Buffer
			if buf, err = m.b.NewF32(n); err == nil {
				s.bufs = append(s.bufs, buf)
			}
			return buf
		}
		i32 := func(n int) backend.Buffer {
			if err != nil {
				return nil
			}
			var buf backend.Buffer
			if buf, err = m.b.NewI32(n); err == nil {
				s.bufs = append(s.bufs, buf)
			}
			return buf
		}
		s.ids, s.pos, s.posl = i32(c), i32(c), i32(1)
		s.x, s.xb = f32(c*p.Embd), f32(c*p.Embd)
		s.q, s.att = f32(c*p.QDim()), f32(c*p.QDim())
		s.k, s.v = f32(c*p.KVDim()), f32(c*p.KVDim())
		s.gate, s.up, s.act = f32(c*p.FF), f32(c*p.FF), f32(p.FF)
		s.xl, s.ql, s.out1 = f32(p.Embd), f32(p.QDim()), f32(p.Vocab)
		if err != nil {
			s.free(m.b)
			return nil, fmt.Errorf("model %s: scratch for %d rows: %w", m.Name, c, err)
		}
		m.scratch[c] = s
	}
	if all && s.outAll == nil {
		buf, err := m.b.NewF32(s.cap * m.Params.Vocab)
		if err != nil {
			return nil, fmt.Errorf("model %s: logits for %d rows: %w", m.Name, s.cap, err)
		}
		s.outAll = buf
		s.bufs = append(s.bufs, buf)
	}
	return s, nil
}
