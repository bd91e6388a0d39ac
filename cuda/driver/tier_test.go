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

// TestRowPairsFor: every kernel with a two-row form has its own RowPairs field, and
// no other kernel has one.
func TestRowPairsFor(t *testing.T) {
	p := RowPairs{Q4_0: 1 << 1, Q5_0: 1 << 2, Q8_0: 1 << 3, Q4_K: 1 << 4, Q5_K: 1 << 5, Q6_K: 1 << 6, F16: 1 << 7}
	seen := map[uint16]string{}
	for _, k := range PairKernels {
		got := p.For(k)
		if got == 0 || seen[got] != "" {
			t.Errorf("For(%q) = %#x: no field of its own (%q has it)", k, got, seen[got])
		}
		seen[got] = k
	}
	if len(seen) != 7 {
		t.Errorf("%d of RowPairs' 7 fields are reached through PairKernels", len(seen))
	}
	for _, k := range []string{"f16s", "f32v", "f32s", "q4_1", ""} {
		if got := p.For(k); got != 0 {
			t.Errorf("For(%q) = %#x, want 0 (no two-row form)", k, got)
		}
	}
}
