//go:build unix

package wasm

import (
	"math"
	"syscall"

	"github.com/tetratelabs/wazero/experimental"
)

// reserveMemory maps maxBytes of anonymous memory that the kernel backs only where it
// is touched (MAP_NORESERVE: no swap is reserved either); nil when it cannot.
func reserveMemory(maxBytes uint64) experimental.LinearMemory {
	if maxBytes == 0 || maxBytes > math.MaxInt {
		return nil
	}
	b, err := syscall.Mmap(-1, 0, int(maxBytes), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON|mapNoReserve)
	if err != nil {
		return nil
	}
	return &mappedMemory{buf: b}
}

// mappedMemory is a linear memory in a mapping of its whole cap: it grows in place.
type mappedMemory struct{ buf []byte }

func (m *mappedMemory) Reallocate(size uint64) []byte {
	if size > uint64(len(m.buf)) {
		return nil
	}
	return m.buf[:size]
}

func (m *mappedMemory) Free() {
	if m.buf != nil {
		syscall.Munmap(m.buf)
		m.buf = nil
	}
}
