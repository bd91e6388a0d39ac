package model_test

import (
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/backend/cpu"
	"github.com/minfer/minfer/core/kv"
	"github.com/minfer/minfer/core/model"
	"github.com/minfer/minfer/internal/golden"
	"github.com/minfer/minfer/internal/modeltest"
)

// TestForwardBatchInvariance: batched sequences get their own forwards' bits and
// caches (modeltest.BatchInvariance) on every architecture and both KV cache types.
func TestForwardBatchInvariance(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 2})
	defer b.Close()
	for _, tc := range []struct {
		file string
		kt   backend.KVType
	}{
		{"stories260K", backend.KVF16},
		{"synthetic/synth-llama-q4_0", backend.KVQ8_0},
		{"synthetic/synth-qwen2-q4_0", backend.KVF16},
		{"synthetic/synth-qwen3-q8_0", backend.KVQ8_0},
	} {
		t.Run(tc.file+"/"+tc.kt.String(), func(t *testing.T) {
			modeltest.BatchInvariance(t, golden.LoadModel(t, b, "models/"+tc.file+".gguf", "target"), tc.kt)
		})
	}
}

// TestForwardBatchManySequences: 70 sequences in one batched forward (more than a CUDA
// launch takes) get their own forwards' bits (modeltest.ManySequences).
func TestForwardBatchManySequences(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 2})
	defer b.Close()
	modeltest.ManySequences(t, golden.LoadModel(t, b, "models/stories260K.gguf", "target"), backend.KVF16, 70)
}

// TestForwardBatchReplay: batches of one shape over changing caches get their own
// forwards' bits at every step (modeltest.BatchReplay; on the CPU every step runs its
// ops, the reference for a backend that replays a graph per shape).
func TestForwardBatchReplay(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 2})
	defer b.Close()
	modeltest.BatchReplay(t, golden.LoadModel(t, b, "models/synthetic/synth-qwen2-q4_0.gguf", "target"), backend.KVQ8_0)
}

func TestForwardBatchErrors(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 2})
	defer b.Close()
	m := golden.LoadModel(t, b, "models/stories260K.gguf", "target")
	c1, _ := m.NewKV(4, backend.KVF16)
	c2, _ := m.NewKV(4, backend.KVF16)
	defer c1.Close()
	defer c2.Close()
	for _, tc := range []struct {
		name string
		seqs []model.Seq
		want string
	}{
		{"none", nil, "no sequences"},
		{"empty sequence", []model.Seq{{IDs: []int32{1}, Cache: c1}, {Cache: c2}}, "sequence 1: model: forward of no tokens"},
		{"repeated cache", []model.Seq{{IDs: []int32{1}, Cache: c1}, {IDs: []int32{2}, Cache: c1}}, "repeats a cache"},
		{"bad id", []model.Seq{{IDs: []int32{1}, Cache: c1}, {IDs: []int32{-3}, Cache: c2}}, "token id -3"},
		{"full cache", []model.Seq{{IDs: []int32{1}, Cache: c1}, {IDs: []int32{1, 2, 3, 4, 5}, Cache: c2}}, "sequence 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := m.ForwardBatch(tc.seqs)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
			if c1.Len() != 0 || c2.Len() != 0 {
				t.Fatalf("a refused batch changed the caches (%d, %d)", c1.Len(), c2.Len())
			}
		})
	}
}

// plainBackend hides the CPU backend's MultiAttention.
type plainBackend struct{ backend.Backend }

// TestForwardBatchNeedsMultiAttention: a backend without backend.MultiAttention runs
// one sequence's ForwardBatch and refuses several with an error that says why, the
// caches unchanged.
func TestForwardBatchNeedsMultiAttention(t *testing.T) {
	cb := cpu.New(cpu.Options{Threads: 2})
	defer cb.Close()
	m := golden.LoadModel(t, plainBackend{cb}, "models/stories260K.gguf", "target")
	c1, _ := m.NewKV(8, backend.KVF16)
	c2, _ := m.NewKV(8, backend.KVF16)
	defer c1.Close()
	defer c2.Close()
	if _, err := m.ForwardBatch([]model.Seq{{IDs: []int32{1, 2}, Cache: c1}}); err != nil {
		t.Fatalf("one sequence: %v", err)
	}
	_, err := m.ForwardBatch([]model.Seq{{IDs: []int32{3}, Cache: c1}, {IDs: []int32{1}, Cache: c2}})
	if err == nil || !strings.Contains(err.Error(), "MultiAttention") {
		t.Fatalf("two sequences: err = %v, want one naming MultiAttention", err)
	}
	if c1.Len() != 2 || c2.Len() != 0 {
		t.Fatalf("the refused batch changed the caches (lengths %d, %d; want 2, 0)", c1.Len(), c2.Len())
	}
}

// BenchmarkForwardBatch is one batched decode step of S sequences of the trained
// target (Q8_0, 18.9M parameters) at positions 100-163 (a chat prompt's length), one
// token each, on two threads: cpu-µs/step is the process CPU time of a step, which a
// shared machine disturbs less than the wall time. A step of S should cost little more
// than a step of 1 (the weights are read once).
func BenchmarkForwardBatch(b *testing.B) {
	be := cpu.New(cpu.Options{Threads: 2})
	defer be.Close()
	m := golden.LoadModel(b, be, "models/trained/target-q8_0.gguf", "target")
	for _, s := range []int{1, 2, 4, 8} {
		b.Run("S="+strconv.Itoa(s), func(b *testing.B) {
			seqs := make([]model.Seq, s)
			prompt := make([]int32, 100)
			for j := range seqs {
				c, err := m.NewKV(512, backend.KVF16)
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				for i := range prompt {
					prompt[i] = int32(1 + (i*7+j*13)%200)
				}
				if _, err := m.Forward(prompt, c, false); err != nil {
					b.Fatal(err)
				}
				seqs[j] = model.Seq{IDs: []int32{int32(5 + j)}, Cache: c}
			}
			b.ResetTimer()
			cpu0 := cpuTime()
			for i := range b.N {
				if i%64 == 0 {
					for _, q := range seqs {
						if err := q.Cache.Truncate(len(prompt)); err != nil {
							b.Fatal(err)
						}
					}
				}
				if _, err := m.ForwardBatch(seqs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric((cpuTime()-cpu0).Seconds()*1e6/float64(b.N), "cpu-µs/step")
		})
	}
}

// cpuTime is the process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSharedStep is the step of chunked prefill on the trained target: 4 decoding
// sequences (one row each, at position 100) and a 60-row prompt chunk of a fifth
// sequence in one forward, the chunk's rows with every row's logits (what the batcher
// asked for before sequences chose their rows: one every-row flag per batch) against
// none (a chunk in the middle of its prompt) and its last row's (a prompt's end).
func BenchmarkSharedStep(b *testing.B) {
	be := cpu.New(cpu.Options{Threads: 2})
	defer be.Close()
	m := golden.LoadModel(b, be, "models/trained/target-q8_0.gguf", "target")
	prompt := make([]int32, 100)
	chunk := make([]int32, 60)
	for i := range chunk {
		chunk[i] = int32(1 + (i*11)%300)
	}
	for _, out := range []model.Out{model.OutAll, model.OutNone, model.OutLast} {
		b.Run("chunk="+[]string{"last", "all", "none"}[out], func(b *testing.B) {
			seqs := make([]model.Seq, 5)
			for j := range seqs {
				c, err := m.NewKV(512, backend.KVF16)
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				seqs[j] = model.Seq{IDs: []int32{int32(5 + j)}, Cache: c, Out: model.OutAll}
				if j == 4 {
					seqs[j] = model.Seq{IDs: chunk, Cache: c, Out: out}
					continue
				}
				for i := range prompt {
					prompt[i] = int32(1 + (i*7+j*13)%200)
				}
				if _, err := m.Forward(prompt, c, false); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			cpu0 := cpuTime()
			for range b.N {
				for j, q := range seqs {
					if err := q.Cache.Truncate(map[bool]int{true: 0, false: len(prompt)}[j == 4]); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := m.ForwardBatch(seqs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric((cpuTime()-cpu0).Seconds()*1e6/float64(b.N), "cpu-µs/step")
		})
	}
}

// rowCounter is a backend that counts the rows each weight's matmuls run.
type rowCounter struct {
	*cpu.Backend
	rows map[backend.Weight]int
}

func (c *rowCounter) MatMul(dst backend.Buffer, w backend.Weight, x backend.Buffer, nt int) {
	c.rows[w] += nt
	c.Backend.MatMul(dst, w, x, nt)
}

// TestForwardBatchClassifierRows: a batched forward runs the classifier, and the last
// layer after its attention, only on the rows whose logits some sequence asks for.
func TestForwardBatchClassifierRows(t *testing.T) {
	cb := cpu.New(cpu.Options{Threads: 2})
	defer cb.Close()
	b := &rowCounter{Backend: cb, rows: map[backend.Weight]int{}}
	m := golden.LoadModel(t, b, "models/synthetic/synth-qwen2-q8_0.gguf", "target")
	var seqs []model.Seq
	for j, out := range []model.Out{model.OutAll, model.OutNone, model.OutLast, model.OutNone} {
		c, err := m.NewKV(32, backend.KVF16)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ids := make([]int32, 3+j)
		for i := range ids {
			ids[i] = int32(1 + i + j)
		}
		seqs = append(seqs, model.Seq{IDs: ids, Cache: c, Out: out})
	}
	clear(b.rows)
	l, err := m.ForwardBatch(seqs) // 3 + 4 + 5 + 6 rows, logits for 3 + 0 + 1 + 0
	if err != nil {
		t.Fatal(err)
	}
	last := &m.W.Layers[len(m.W.Layers)-1]
	for _, tc := range []struct {
		name string
		w    backend.Weight
		want int
	}{
		{"classifier", m.W.Output, 4},
		{"last layer's down projection", last.Down, 4},
		{"last layer's query projection", last.Wq, 18}, // every row's K/V is stored
		{"first layer's down projection", m.W.Layers[0].Down, 18},
	} {
		if got := b.rows[tc.w]; got != tc.want {
			t.Errorf("%s: %d rows, want %d", tc.name, got, tc.want)
		}
	}
	if l.Rows != 4 {
		t.Errorf("%d logits rows, want 4", l.Rows)
	}
}

// seqGraphRec is the CPU backend with a recording backend.SeqGraphs (and Graphs): it
// runs every record and keeps the keys and caches ForwardBatch gave.
type seqGraphRec struct {
	*cpu.Backend
	keys []string
	kvs  [][]backend.KV
}

func (r *seqGraphRec) Run(key string, record func()) error { record(); return nil }

func (r *seqGraphRec) RunSeqs(key string, kvs []backend.KV, record func()) error {
	r.keys, r.kvs = append(r.keys, key), append(r.kvs, slices.Clone(kvs))
	record()
	return nil
}

// TestForwardBatchGraphKeys: ForwardBatch names a batch's graph by its shape only —
// the same key for the same rows and outputs on other caches, another key for other
// rows or outputs, none past the graphs' 64 rows — and gives the caches in sequence
// order, each its own (the contract backend.SeqGraphs replays by).
func TestForwardBatchGraphKeys(t *testing.T) {
	rec := &seqGraphRec{Backend: cpu.New(cpu.Options{Threads: 2})}
	defer rec.Close()
	m := golden.LoadModel(t, rec, "models/synthetic/synth-qwen2-q4_0.gguf", "target")
	caches := make([]*kv.Cache, 4)
	for j := range caches {
		c, err := m.NewKV(128, backend.KVF16)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		caches[j] = c
	}
	batch := func(js []int, n int, out model.Out) {
		seqs := make([]model.Seq, len(js))
		for k, j := range js {
			ids := make([]int32, n)
			for i := range ids {
				ids[i] = int32(1 + j + i)
			}
			seqs[k] = model.Seq{IDs: ids, Cache: caches[j], Out: out}
		}
		if _, err := m.ForwardBatch(seqs); err != nil {
			t.Fatal(err)
		}
		got := rec.kvs[len(rec.kvs)-1]
		for k, j := range js {
			if got[k] != caches[j].Device() {
				t.Fatalf("batch %v: cache %d is not sequence %d's", js, k, j)
			}
		}
	}
	batch([]int{0, 1}, 1, model.OutLast)
	batch([]int{2, 3}, 1, model.OutLast)    // other caches: the same shape
	batch([]int{3, 0}, 1, model.OutLast)    // another order
	batch([]int{0, 1}, 2, model.OutAll)     // other rows and outputs
	batch([]int{0, 1, 2}, 1, model.OutLast) // another count
	batch([]int{0, 1}, 40, model.OutNone)   // 80 rows: past the graphs' 64
	k := rec.keys
	if k[0] == "" || k[1] != k[0] || k[2] != k[0] {
		t.Errorf("one shape on other caches: keys %q, %q, %q, want one", k[0], k[1], k[2])
	}
	if k[3] == k[0] || k[4] == k[0] || k[3] == k[4] || k[3] == "" || k[4] == "" {
		t.Errorf("other shapes: keys %q, %q beside %q, want each its own", k[3], k[4], k[0])
	}
	if k[5] != "" {
		t.Errorf("an 80-row batch: key %q, want none", k[5])
	}
	// another model on the backend never shares a key
	m2 := golden.LoadModel(t, rec, "models/synthetic/synth-qwen2-q4_0.gguf", "target")
	c2, err := m2.NewKV(128, backend.KVF16)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	c3, err := m2.NewKV(128, backend.KVF16)
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if _, err := m2.ForwardBatch([]model.Seq{{IDs: []int32{1}, Cache: c2}, {IDs: []int32{2}, Cache: c3}}); err != nil {
		t.Fatal(err)
	}
	if last := rec.keys[len(rec.keys)-1]; last == k[0] {
		t.Errorf("a second model of the same name shares the first's key %q", last)
	}
}
