package wasm

import (
	"context"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/tetratelabs/wazero/experimental"

	"github.com/minfer/minfer/sdk"
)

// TestMemoryGrowsInPlace: a linear memory grows without copying — in place where the
// cap can be reserved, else by doubling (a bounded number of moves) — so growing one
// page at a time to the cap costs O(cap), not O(cap²) (memory.go has the figures).
func TestMemoryGrowsInPlace(t *testing.T) {
	const page, max = 1 << 16, 64 << 20
	for _, tc := range []struct {
		name     string
		mem      func() experimental.LinearMemory
		maxMoves int
	}{
		{"reserved", func() experimental.LinearMemory { return reserveMemory(max) }, 0},
		{"doubling", func() experimental.LinearMemory { return &sliceMemory{buf: make([]byte, 0, page), max: max} }, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.mem()
			if m == nil {
				t.Skip("this system reserves no address space for a memory (" + runtime.GOOS + ")")
			}
			defer m.Free()
			b := m.Reallocate(page)
			base, moves := unsafe.SliceData(b), 0
			for size := uint64(2 * page); size <= max; size += page {
				b = m.Reallocate(size)
				if uint64(len(b)) != size {
					t.Fatalf("Reallocate(%d): %d bytes", size, len(b))
				}
				if p := unsafe.SliceData(b); p != base {
					moves, base = moves+1, p
				}
				b[size-1] = 1 // the new page is usable
			}
			if moves > tc.maxMoves {
				t.Errorf("%d moves growing to %d MiB one page at a time, want ≤ %d", moves, max>>20, tc.maxMoves)
			}
			if m.Reallocate(max+page) != nil {
				t.Error("grew beyond the cap")
			}
		})
	}
}

// TestMemoryGrowthToTheCap: a module growing one page at a time until the cap refuses
// (memory.grow answers -1) still answers its call.
func TestMemoryGrowthToTheCap(t *testing.T) {
	ctx := context.Background()
	grow := append(append([]byte{0x03, 0x40}, append(i32c(1), 0x40, 0x00)...), append(i32c(-1), 0x47, 0x0d, 0x00, 0x0b)...)
	resp := sdk.AppendPolicyResponse(nil, sdk.DepthDecision{Depth: 2})
	m, err := Load(ctx, hostile{minor: 2, policy: append(grow, i64c(sdk.Pack(addrResp, uint32(len(resp))))...), resp: resp}.bytes(),
		Options{Name: "grow", Timeout: 30 * time.Second, MemoryMB: 64, CacheDir: "-", Instances: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	p, err := m.Policy(ctx, "evil", nil, CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if d, err := p.NextDepth(ctx, sdk.RoundOutcome{Round: -1, MaxDepth: 8}); err != nil || d.Depth != 2 {
		t.Fatalf("got %+v %v, want depth 2", d, err)
	}
}
