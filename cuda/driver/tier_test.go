package driver

import (
	"strings"
	"testing"
)

func TestTierFor(t *testing.T) {
	tests := []struct {
		major, minor int
		want         string
	}{
		{7, 5, "turing"}, {8, 0, "ampere-dc"}, {8, 6, "ampere"}, {8, 7, "ampere"}, {8, 9, "ada"},
		{9, 0, "hopper"}, {10, 0, "blackwell-dc"}, {10, 3, "blackwell-dc"}, {12, 0, "blackwell"},
		{12, 1, "gb10"}, {13, 0, "gb10"},
	}
	for _, tt := range tests {
		got, err := TierFor(tt.major, tt.minor)
		if err != nil {
			t.Fatalf("TierFor(%d.%d): %v", tt.major, tt.minor, err)
		}
		if got.Name != tt.want {
			t.Errorf("TierFor(%d.%d) = %s, want %s", tt.major, tt.minor, got.Name, tt.want)
		}
	}
}

func TestTierForOld(t *testing.T) {
	for _, cc := range [][2]int{{6, 1}, {7, 0}, {5, 2}} {
		if _, err := TierFor(cc[0], cc[1]); err == nil || !strings.Contains(err.Error(), "not supported") {
			t.Errorf("TierFor(%d.%d): got err %v, want not supported", cc[0], cc[1], err)
		}
	}
}

func TestTierTableSane(t *testing.T) {
	prev := 0
	for _, tr := range Tiers() {
		cc := tr.Major*10 + tr.Minor
		if cc <= prev {
			t.Errorf("tier %s: compute capability %d not above previous %d", tr.Name, cc, prev)
		}
		prev = cc
		if tr.MMVQMaxRows < 1 || tr.MMVQMaxRows > 8 {
			t.Errorf("tier %s: MMVQMaxRows %d outside 1..8 (kernels are instantiated for 1..8)", tr.Name, tr.MMVQMaxRows)
		}
		if tr.GEMMMinRows <= tr.MMVQMaxRows {
			t.Errorf("tier %s: GEMMMinRows %d must exceed MMVQMaxRows %d (row identity)", tr.Name, tr.GEMMMinRows, tr.MMVQMaxRows)
		}
		for k, set := range tr.MMQRows {
			if set.Has(0) || set.Has(1) || tr.Major < 8 {
				t.Errorf("tier %s: MMQRows[%s] = %#x (the int8 mma needs sm_80 and nt 1 stays on the mat-vec)", tr.Name, k, set)
			}
		}
		if tr.MMVQWarps < 1 || tr.MMVQWarps > 32 || tr.AttnChunk < 32 || tr.AttnChunk%32 != 0 || tr.AttnMaxSplits < 1 || tr.TopKMaxK < 1 {
			t.Errorf("tier %s: bad thresholds %+v", tr.Name, tr)
		}
	}
}

func TestSelectTierOverride(t *testing.T) {
	tests := []struct {
		override string
		want     string
		wantErr  string
	}{
		{"", "hopper", ""},
		{"ada", "ada", ""},
		{" Turing ", "turing", ""},
		{"8.6", "ampere", ""},
		{"pascal", "", "unknown device tier"},
		{"6.0", "", "not supported"},
	}
	for _, tt := range tests {
		t.Run(tt.override, func(t *testing.T) {
			got, err := SelectTier(9, 0, tt.override)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got.Name != tt.want {
				t.Fatalf("got %s, %v; want %s", got.Name, err, tt.want)
			}
		})
	}
}

func TestCacheKey(t *testing.T) {
	src := Source{Name: "a.cu", Code: []byte("x"), Headers: map[string][]byte{"common.cuh": []byte("h")}}
	base := CacheKey(src, "sm_90", []string{"A=1"}, "13.0")
	if base != CacheKey(src, "sm_90", []string{"A=1"}, "13.0") {
		t.Fatal("key not deterministic")
	}
	changed := []struct {
		name string
		key  string
	}{
		{"code", CacheKey(Source{Name: "a.cu", Code: []byte("y"), Headers: src.Headers}, "sm_90", []string{"A=1"}, "13.0")},
		{"header", CacheKey(Source{Name: "a.cu", Code: []byte("x"), Headers: map[string][]byte{"common.cuh": []byte("g")}}, "sm_90", []string{"A=1"}, "13.0")},
		{"arch", CacheKey(src, "sm_89", []string{"A=1"}, "13.0")},
		{"defines", CacheKey(src, "sm_90", []string{"A=2"}, "13.0")},
		{"nvrtc", CacheKey(src, "sm_90", []string{"A=1"}, "12.8")},
	}
	for _, c := range changed {
		if c.key == base {
			t.Errorf("changing %s kept the cache key", c.name)
		}
	}
}

func TestResultNames(t *testing.T) {
	if got := (&Error{Call: "cuMemAlloc", Code: 2}).Error(); got != "cuda: cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY (2)" {
		t.Errorf("got %q", got)
	}
	if got := Result(12345).String(); got != "CUDA_ERROR_12345" {
		t.Errorf("got %q", got)
	}
	if !IsOutOfMemory(&Error{Call: "x", Code: 2}) || IsOutOfMemory(&Error{Call: "x", Code: 1}) {
		t.Error("IsOutOfMemory wrong")
	}
}

// TestInitWithoutGPU checks that a machine without the driver gets a clear error, not
// a crash. On a machine with a GPU, Init succeeds and the test checks nothing more.
func TestInitWithoutGPU(t *testing.T) {
	err := Init()
	if err == nil {
		t.Skip("a CUDA driver is present")
	}
	if !strings.Contains(err.Error(), "libcuda.so.1 not found") {
		t.Errorf("got %v, want it to say libcuda.so.1 not found", err)
	}
}

// TestNTs: the old raw masks of the Hopper tier (0x1FE, 0x1F2, 0x100, 0x1FC) are the
// ranges it now names, and Has agrees with the bits.
func TestNTs(t *testing.T) {
	for _, c := range []struct {
		s    NTSet
		want uint16
	}{{NTs(1, 8), 0x1FE}, {NTs(1, 1) | NTs(4, 8), 0x1F2}, {NTs(8, 8), 0x100}, {NTs(2, 8), 0x1FC}, {NTs(5, 4), 0}} {
		if uint16(c.s) != c.want {
			t.Errorf("got %#x, want %#x", uint16(c.s), c.want)
		}
		for nt := -1; nt < 20; nt++ {
			if c.s.Has(nt) != (nt >= 0 && nt < 16 && c.want&(1<<nt) != 0) {
				t.Errorf("%#x.Has(%d) = %v", c.want, nt, c.s.Has(nt))
			}
		}
	}
}
