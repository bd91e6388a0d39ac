package kv

import (
	"errors"
	"strings"
	"testing"

	"github.com/minfer/minfer/core/backend"
)

type fakeKV struct {
	spec  backend.KVSpec
	freed bool
}

func (f *fakeKV) Spec() backend.KVSpec { return f.spec }
func (f *fakeKV) Bytes() int64         { return SpecBytes(f.spec) }

type fakeAlloc struct {
	last *fakeKV
	fail error
}

func (a *fakeAlloc) NewKV(s backend.KVSpec) (backend.KV, error) {
	if a.fail != nil {
		return nil, a.fail
	}
	a.last = &fakeKV{spec: s}
	return a.last, nil
}
func (a *fakeAlloc) Free(x any) { x.(*fakeKV).freed = true }

func TestCacheBookkeeping(t *testing.T) {
	a := &fakeAlloc{}
	c, err := New(a, backend.KVSpec{Layers: 2, KVHeads: 4, HeadDim: 32, Ctx: 16})
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name    string
		op      func() error
		wantLen int
		wantErr string
	}{
		{"append 10", func() error { return c.Append(10) }, 10, ""},
		{"append 6 fills", func() error { return c.Append(6) }, 16, ""},
		{"append 1 overflows", func() error { return c.Append(1) }, 16, "kv: context full (16 tokens)"},
		{"truncate to 3", func() error { return c.Truncate(3) }, 3, ""},
		{"truncate beyond len", func() error { return c.Truncate(4) }, 3, "outside [0, 3]"},
		{"truncate negative", func() error { return c.Truncate(-1) }, 3, "outside"},
		{"append after rollback", func() error { return c.Append(13) }, 16, ""},
		{"reset", func() error { c.Reset(); return nil }, 0, ""},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			err := s.op()
			if s.wantErr == "" && err != nil {
				t.Fatalf("got error %v", err)
			}
			if s.wantErr != "" && (err == nil || !strings.Contains(err.Error(), s.wantErr)) {
				t.Fatalf("got error %v, want one containing %q", err, s.wantErr)
			}
			if got := c.Len(); got != s.wantLen {
				t.Fatalf("Len: got %d, want %d", got, s.wantLen)
			}
		})
	}
	if err := c.Check(17); !errors.Is(err, ErrFull) {
		t.Fatalf("Check(17): got %v, want ErrFull", err)
	}
	c.Close()
	if !a.last.freed {
		t.Fatal("Close did not free the device storage")
	}
}

func TestSpecBytes(t *testing.T) {
	for _, tc := range []struct {
		spec backend.KVSpec
		want int64
	}{
		{backend.KVSpec{Layers: 5, KVHeads: 4, HeadDim: 8, Ctx: 2048, Type: backend.KVF16}, 5 * 2 * 2048 * 32 * 2},
		{backend.KVSpec{Layers: 2, KVHeads: 2, HeadDim: 64, Ctx: 100, Type: backend.KVQ8_0}, 2 * 2 * 100 * 128 / 32 * 34},
	} {
		if got := SpecBytes(tc.spec); got != tc.want {
			t.Errorf("SpecBytes(%+v): got %d, want %d", tc.spec, got, tc.want)
		}
	}
}

func TestNewErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		a    *fakeAlloc
		spec backend.KVSpec
		want string
	}{
		{"zero ctx", &fakeAlloc{}, backend.KVSpec{Layers: 1, KVHeads: 1, HeadDim: 32}, "invalid spec"},
		{"q8_0 odd head", &fakeAlloc{}, backend.KVSpec{Layers: 1, KVHeads: 1, HeadDim: 8, Ctx: 4, Type: backend.KVQ8_0}, "multiple of 32"},
		{"alloc fails", &fakeAlloc{fail: errors.New("out of memory")}, backend.KVSpec{Layers: 1, KVHeads: 1, HeadDim: 32, Ctx: 4}, "out of memory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.a, tc.spec)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want error containing %q", err, tc.want)
			}
		})
	}
}

func TestParseType(t *testing.T) {
	for in, want := range map[string]backend.KVType{"f16": backend.KVF16, "q8_0": backend.KVQ8_0, "Q8_0": backend.KVQ8_0} {
		got, err := ParseType(in)
		if err != nil || got != want {
			t.Errorf("ParseType(%q): got %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseType("q4_0"); err == nil {
		t.Error("ParseType(q4_0): got nil error")
	}
}
