package cpu

import "syscall"

// reserveKV returns n zeroed bytes of anonymous memory mapped without a swap
// reservation (MAP_NORESERVE): an arena as large as a KV budget costs address space at
// start, and memory only as its blocks are written. Outside the Go heap, so the
// collector neither scans nor counts it. releaseKV unmaps it.
func reserveKV(n int) ([]byte, error) {
	if n == 0 {
		return []byte{}, nil
	}
	return syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE|syscall.MAP_NORESERVE)
}

func releaseKV(b []byte) {
	if len(b) > 0 {
		syscall.Munmap(b)
	}
}
