package cuda

import (
	"fmt"
	"unsafe"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/cuda/driver"
)

var _ backend.SeqGraphs = (*Backend)(nil)

// A batched forward's *_seqs launches read their sequences' caches from a table in
// device memory (seqTable), not from their arguments, so a graph of one can replay on
// other caches: RunSeqs captures with every table in memory of the graph's own, and
// before each replay writes the caches of that call into them. A decoding batch (and
// the draft model's lockstep steps) repeats its shape — rows and logits per sequence —
// from step to step while its sequences come and go, so one graph serves every batch
// of that shape.

// maxSeqGraphs is the most RunSeqs graphs kept; the one replayed longest ago goes
// first. maxSeqSeen bounds the keys seen once and not captured.
const (
	maxSeqGraphs = 128
	maxSeqSeen   = 4096
)

// seqGraph is a captured batched forward and the launch tables it reads.
type seqGraph struct {
	g     *driver.Graph
	tabs  []*seqGraphTab
	specs []backend.KVSpec // the shape of the cache at each position, at capture
	used  uint64           // seqGraphState.tick at its last replay
}

// seqGraphTab is one table of a seqGraph: its device copy and its host copy as last
// written, each descriptor with the position of the cache it describes.
type seqGraphTab struct {
	p      driver.DevicePtr
	descs  []seqDesc
	seq    []int
	loaded bool // the device copy holds descs
}

// seqCapture is the state of a RunSeqs capture: the caches by position, the tables
// made so far, and why the record cannot be replayed on other caches ("" if it can).
type seqCapture struct {
	kvs     []*KV
	tabs    []*seqGraphTab
	refused string
}

// seqGraphState is the Backend's RunSeqs bookkeeping.
type seqGraphState struct {
	graphs  map[string]*seqGraph
	seen    map[string]bool // keys run once without a capture
	refused map[string]bool // keys whose record cannot be captured for other caches
	capture *seqCapture     // during a RunSeqs capture
	tick    uint64
}

// RunSeqs replays the graph captured for key with kvs as its caches (backend.SeqGraphs).
// A key's first call runs record directly; its second captures it. With
// MINFER_NO_GRAPHS=1 or MINFER_NO_SEQ_GRAPHS=1, or an empty key, record runs every time.
func (b *Backend) RunSeqs(key string, kvs []backend.KV, record func()) error {
	if b.closed {
		return errClosed
	}
	st := &b.seqG
	if b.sw.noGraphs || b.sw.noSeqGraphs || key == "" || st.refused[key] {
		return b.Run("", record)
	}
	ks := make([]*KV, len(kvs))
	for j, x := range kvs {
		ks[j] = kvOf(x, "RunSeqs")
	}
	if st.graphs == nil {
		st.graphs, st.seen, st.refused = map[string]*seqGraph{}, map[string]bool{}, map[string]bool{}
	}
	defer b.enter()()
	st.tick++
	if g := st.graphs[key]; g != nil {
		if err := b.bindSeqGraph(key, g, ks); err != nil {
			return err
		}
		g.used = st.tick
		b.epoch++
		defer func() { b.epoch++ }()
		return g.g.Launch(b.stream)
	}
	if !st.seen[key] {
		if len(st.seen) >= maxSeqSeen {
			clear(st.seen)
		}
		st.seen[key] = true
		record()
		b.flush()
		return nil
	}
	delete(st.seen, key)
	if len(st.graphs) >= maxSeqGraphs {
		b.evictSeqGraph()
	}
	b.epoch++
	defer func() { b.epoch++ }()
	c := &seqCapture{kvs: ks}
	st.capture = c
	g, err := b.capture(key, record)
	st.capture = nil
	if err != nil || c.refused != "" {
		if g != nil {
			b.fail(g.Destroy())
		}
		for _, t := range c.tabs {
			b.free(t.p)
		}
	}
	switch {
	case err != nil:
		return err
	case c.refused != "":
		// Not replayable on other caches: this key runs directly from now on.
		st.refused[key] = true
		b.epoch++
		record()
		b.flush()
		return nil
	}
	sg := &seqGraph{g: g, tabs: c.tabs, specs: make([]backend.KVSpec, len(ks)), used: st.tick}
	for j, kv := range ks {
		sg.specs[j] = kv.spec
	}
	st.graphs[key] = sg
	if err := b.bindSeqGraph(key, sg, ks); err != nil {
		return err
	}
	return g.Launch(b.stream)
}

// bindSeqGraph writes the caches ks into g's tables where they differ from the ones
// there (enqueued, so a replay still reading the old ones finishes first).
func (b *Backend) bindSeqGraph(key string, g *seqGraph, ks []*KV) error {
	if len(ks) != len(g.specs) {
		return fmt.Errorf("BUG: cuda: graph %q: %d caches, captured with %d", key, len(ks), len(g.specs))
	}
	for j, kv := range ks {
		if kv.spec != g.specs[j] {
			return fmt.Errorf("BUG: cuda: graph %q: cache %d of shape %+v, captured with %+v", key, j, kv.spec, g.specs[j])
		}
	}
	for _, t := range g.tabs {
		changed := !t.loaded
		for i := range t.descs {
			d, kv := &t.descs[i], ks[t.seq[i]]
			if d.kc != kv.k || d.vc != kv.v || d.kd != kv.kd || d.vd != kv.vd {
				d.kc, d.vc, d.kd, d.vd = kv.k, kv.v, kv.kd, kv.vd
				changed = true
			}
		}
		if !changed {
			continue
		}
		n := len(t.descs) * int(unsafe.Sizeof(seqDesc{}))
		if err := b.stream.CopyHtoD(t.p, unsafe.Pointer(&t.descs[0]), n); err != nil {
			return fmt.Errorf("graph %q: sequence table: %w", key, err)
		}
		t.loaded = true
	}
	return nil
}

// captureTable is seqTable during a RunSeqs capture: the address of a table of the
// graph's own holding descs (made on first use; bindSeqGraph writes it before the
// first launch). A descriptor naming a cache not among RunSeqs' refuses the capture.
func (c *seqCapture) table(b *Backend, descs []seqDesc) driver.DevicePtr {
	for _, t := range c.tabs {
		if len(t.descs) == len(descs) && string(descBytes(t.descs)) == string(descBytes(descs)) {
			return t.p
		}
	}
	t := &seqGraphTab{descs: append([]seqDesc(nil), descs...), seq: make([]int, len(descs))}
	for i, d := range descs {
		t.seq[i] = -1
		for j, kv := range c.kvs {
			if kv.k == d.kc {
				t.seq[i] = j
			}
		}
		if t.seq[i] < 0 {
			c.refuse("a sequence's cache is not among RunSeqs' caches")
			return 0
		}
	}
	p, err := b.alloc("graph sequence table", int64(len(descs))*int64(unsafe.Sizeof(seqDesc{})))
	if err != nil {
		b.fail(err)
		return 0
	}
	t.p = p
	c.tabs = append(c.tabs, t)
	return p
}

// refuse marks the capture as not replayable on other caches (the first reason kept).
func (c *seqCapture) refuse(why string) {
	if c.refused == "" {
		c.refused = why
	}
}

func descBytes(d []seqDesc) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(&d[0])), len(d)*int(unsafe.Sizeof(seqDesc{})))
}

// evictSeqGraph drops the RunSeqs graph replayed longest ago, after the stream's work
// (a replay of it may still be reading its tables).
func (b *Backend) evictSeqGraph() {
	st := &b.seqG
	old, oldKey := (*seqGraph)(nil), ""
	for k, g := range st.graphs {
		if old == nil || g.used < old.used {
			old, oldKey = g, k
		}
	}
	if old == nil {
		return
	}
	b.fail(b.stream.Synchronize())
	b.fail(old.g.Destroy())
	for _, t := range old.tabs {
		b.free(t.p)
	}
	delete(st.graphs, oldKey)
}
