//go:build cuda

package cuda_test

import (
	"testing"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/backend/cpu"
	"github.com/minfer/minfer/core/gguf"
	"github.com/minfer/minfer/core/model"
)

type side struct {
	b backend.Backend
	m *model.Model
}

func loadOn(t *testing.T, b backend.Backend, path string) *model.Model {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(b, f, model.Options{Name: "target"})
	if err != nil {
		t.Fatalf("%s: load: %v", b.Name(), err)
	}
	return m
}

func compareModel(t *testing.T, path string, kvt backend.KVType, bound float64, sameTokens bool) {
	g := open(t)
	defer g.Close()
	c := cpu.New(cpu.Options{})
	defer c.Close()
	sides := []*side{{b: g}, {b: c}}
	var decoded [2][]int32
	for _, s := range sides {
		s.m = loadOn(t, s.b, path)
		defer s.m.Close()
	}
	vocab := sides[0].m.Params.Vocab
	if kvt == backend.KVQ8_0 && sides[0].m.Params.HeadDim%32 != 0 {
		t.Skipf("head dim %d: no Q8_0 cache", sides[0].m.Params.HeadDim)
	}
	prompt := []int32{1, 15, 300, 42, 7, 99, 211, 3, 64, 128}
	for i := range prompt {
		prompt[i] %= int32(vocab)
	}
	logits := make([][]float32, 2)
	for i, s := range sides {
		kv, err := s.m.NewKV(256, kvt)
		if err != nil {
			t.Fatal(err)
		}
		l, err := s.m.Forward(prompt, kv, true)
		if err != nil {
			t.Fatalf("%s: prompt forward: %v", s.b.Name(), err)
		}
		logits[i] = make([]float32, l.Rows*l.Cols)
		if err := s.m.ReadLogits(l, logits[i]); err != nil {
			t.Fatal(err)
		}
		defer kv.Close()
		// Greedy decode from here on each side.
		tok := argmax(logits[i][(l.Rows-1)*vocab:])
		steps := []int32{tok}
		for range 8 {
			l, err := s.m.Forward([]int32{tok}, kv, false)
			if err != nil {
				t.Fatalf("%s: decode: %v", s.b.Name(), err)
			}
			row := make([]float32, vocab)
			if err := s.m.ReadLogits(l, row); err != nil {
				t.Fatal(err)
			}
			tok = argmax(row)
			steps = append(steps, tok)
		}
		t.Logf("%s greedy: %v", s.b.Name(), steps)
		decoded[i] = steps
	}
	if e := relErr(logits[0], logits[1]); e > bound {
		t.Errorf("prompt logits: relative error %.3g > %.3g", e, bound)
	} else {
		t.Logf("prompt logits: relative error %.3g (bound %.3g)", e, bound)
	}
	// A forward longer than the model's graph bound (a prefill chunk) runs directly,
	// not from a captured graph: twice on a fresh cache, it must match the CPU too.
	long := make([]int32, 90)
	for i := range long {
		long[i] = int32((i*37 + 11) % vocab)
	}
	var longLogits [2][]float32
	for i, s := range sides {
		for rep := range 2 {
			kv, err := s.m.NewKV(256, kvt)
			if err != nil {
				t.Fatal(err)
			}
			l, err := s.m.Forward(long, kv, true)
			if err != nil {
				kv.Close()
				t.Fatalf("%s: long forward: %v", s.b.Name(), err)
			}
			got := make([]float32, l.Rows*l.Cols)
			err = s.m.ReadLogits(l, got)
			kv.Close()
			if err != nil {
				t.Fatal(err)
			}
			if rep == 1 && relErr(got, longLogits[i]) != 0 {
				t.Errorf("%s: a second long forward differs from the first", s.b.Name())
			}
			longLogits[i] = got
		}
	}
	if e := relErr(longLogits[0], longLogits[1]); e > bound {
		t.Errorf("long (90-token) forward logits: relative error %.3g > %.3g", e, bound)
	}
	if sameTokens {
		for j := range decoded[0] {
			if decoded[0][j] != decoded[1][j] {
				t.Errorf("greedy step %d: cuda %d, cpu %d", j, decoded[0][j], decoded[1][j])
				break
			}
		}
	}
}

func argmax(v []float32) int32 {
	best := 0
	for i := range v {
		if v[i] > v[best] {
			best = i
		}
	}
	return int32(best)
}
