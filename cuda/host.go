package cuda

import (
	"fmt"
	"unsafe"
)

// HostMem is page-locked host memory mapped into the device's address space: the
// device reads and writes it through Device(), the host through Bytes(), and async
// copies to or from it need no staging by the driver.
type HostMem struct {
	p   unsafe.Pointer
	n   int
	dev DevicePtr
}

// Host allocation flags (CU_MEMHOSTALLOC_*).
const (
	hostAllocPortable  = 1
	hostAllocDeviceMap = 2
)

// HostAlloc allocates n bytes of page-locked, device-mapped host memory, zeroed.
func HostAlloc(n int) (*HostMem, error) {
	if n <= 0 {
		return nil, fmt.Errorf("BUG: cuda: HostAlloc(%d)", n)
	}
	h := &HostMem{n: n}
	if err := check("cuMemHostAlloc", call(drv.cuMemHostAlloc, uintptr(unsafe.Pointer(&h.p)), uintptr(n), hostAllocPortable|hostAllocDeviceMap)); err != nil {
		return nil, fmt.Errorf("%w (%d bytes of pinned host memory)", err, n)
	}
	if err := check("cuMemHostGetDevicePointer", call(drv.cuMemHostGetDevicePointer, uintptr(unsafe.Pointer(&h.dev)), uintptr(h.p), 0)); err != nil {
		call(drv.cuMemFreeHost, uintptr(h.p))
		return nil, err
	}
	clear(h.Bytes())
	return h, nil
}

// Bytes is the host view of the memory (valid until Free).
func (h *HostMem) Bytes() []byte { return unsafe.Slice((*byte)(h.p), h.n) }

// Ptr is the host address of byte off.
func (h *HostMem) Ptr(off int) unsafe.Pointer { return unsafe.Add(h.p, off) }

// Device is the device address of the memory.
func (h *HostMem) Device() DevicePtr { return h.dev }

// Len is the size in bytes.
func (h *HostMem) Len() int { return h.n }

// Free releases the memory; later use is a bug.
func (h *HostMem) Free() error {
	if h == nil || h.p == nil {
		return nil
	}
	p := h.p
	h.p, h.n, h.dev = nil, 0, 0
	return check("cuMemFreeHost", call(drv.cuMemFreeHost, uintptr(p)))
}
