package wasm

import (
	"github.com/tetratelabs/wazero/experimental"
)

// A plugin's linear memory. wazero's default grows a memory by appending the new pages
// to a fresh copy: a module growing one page (64 KiB) at a time to the 64 MiB cap took
// 0.55 s and 242 MB of RSS in one call, to a 1 GiB cap (memory_mb = 1024) 19 s and
// 3.4 GB (Intel Xeon, AVX-512, 2 cores, busy). memoryAllocator instead reserves the cap
// once (address space, not memory: untouched pages stay unbacked) and grows in place,
// so a call pays only for the pages the module touches: the same growth took 0.1-0.2 ms
// to 64 MiB and 1 ms to 1 GiB with no RSS beyond the touched pages, and freeing an
// instance returns its pages at once. Where the reservation cannot be made, memory
// grows by doubling its capacity: O(size) bytes copied in all, not O(size²).
// TestMemoryGrowsInPlace checks that growth does not copy.
var memoryAllocator experimental.MemoryAllocator = experimental.MemoryAllocatorFunc(newLinearMemory)

func newLinearMemory(capBytes, maxBytes uint64) experimental.LinearMemory {
	if m := reserveMemory(maxBytes); m != nil {
		return m
	}
	return &sliceMemory{buf: make([]byte, 0, capBytes), max: maxBytes}
}

// sliceMemory is a Go slice that grows by doubling its capacity, up to max.
type sliceMemory struct {
	buf []byte
	max uint64
}

func (m *sliceMemory) Reallocate(size uint64) []byte {
	if size > m.max {
		return nil
	}
	if size <= uint64(cap(m.buf)) {
		m.buf = m.buf[:size] // memory never shrinks: the bytes past len are still zero
		return m.buf
	}
	nb := make([]byte, size, min(max(size, 2*uint64(cap(m.buf))), m.max))
	copy(nb, m.buf)
	m.buf = nb
	return nb
}

func (m *sliceMemory) Free() { m.buf = nil }
