package driver

import (
	"fmt"
	"unsafe"
)

// HostMem is page-locked host memory: async copies to or from it need no staging by
// the driver, so a copy enqueued behind a stream's work completes with it.
type HostMem struct {
	p unsafe.Pointer
	n int
}

// hostAllocPortable (CU_MEMHOSTALLOC_PORTABLE) makes the memory pinned for every context.
const hostAllocPortable = 1

// HostAlloc allocates n bytes of page-locked host memory, zeroed.
func HostAlloc(n int) (*HostMem, error) {
	if n <= 0 {
		return nil, fmt.Errorf("BUG: cuda: HostAlloc(%d)", n)
	}
	h := &HostMem{n: n}
	if err := check("cuMemHostAlloc", call(drv.cuMemHostAlloc, uintptr(unsafe.Pointer(&h.p)), uintptr(n), hostAllocPortable)); err != nil {
		return nil, fmt.Errorf("%w (%d bytes of pinned host memory)", err, n)
	}
	clear(h.Bytes())
	return h, nil
}

// Bytes is the host view of the memory (valid until Free).
func (h *HostMem) Bytes() []byte { return unsafe.Slice((*byte)(h.p), h.n) }

// Ptr is the host address of byte off.
func (h *HostMem) Ptr(off int) unsafe.Pointer { return unsafe.Add(h.p, off) }

// Len is the size in bytes.
func (h *HostMem) Len() int { return h.n }

// Free releases the memory; later use is a bug.
func (h *HostMem) Free() error {
	if h == nil || h.p == nil {
		return nil
	}
	p := h.p
	h.p, h.n = nil, 0
	return check("cuMemFreeHost", call(drv.cuMemFreeHost, uintptr(p)))
}
