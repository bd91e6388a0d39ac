package cpu_test

import (
	"os"
	"testing"
	"time"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/backend/cpu"
	"github.com/minfer/minfer/core/gguf"
	"github.com/minfer/minfer/core/model"
)

func TestZZProf(t *testing.T) {
	path := os.Getenv("PROF_MODEL")
	if path == "" {
		t.Skip()
	}
	b := cpu.New(cpu.Options{Threads: 2})
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(b, f, model.Options{Name: "t"})
	if err != nil {
		t.Fatal(err)
	}
	for rep := 0; rep < 2; rep++ {
		kv, _ := m.NewKV(512, backend.KVF16)
		ids := make([]int32, 64)
		for i := range ids {
			ids[i] = int32(i * 7)
		}
		st := time.Now()
		if _, err := m.Forward(ids, kv, false); err != nil {
			t.Fatal(err)
		}
		t.Logf("pp64: %.1f t/s", 64/time.Since(st).Seconds())
		st = time.Now()
		for i := range 16 {
			if _, err := m.Forward([]int32{int32(i)}, kv, false); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("tg16: %.1f t/s", 16/time.Since(st).Seconds())
		kv.Close()
	}
}
