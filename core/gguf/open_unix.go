//go:build unix

package gguf

import (
	"fmt"
	"os"
	"syscall"
)

// Open maps the file at path read-only and parses it. The File must be closed to
// release the mapping. Errors read "gguf: PATH: problem".
func Open(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	size := st.Size()
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("gguf: %s: not a regular file", path)
	}
	if size == 0 {
		return nil, fmt.Errorf("gguf: %s: file is empty", path)
	}
	if int64(int(size)) != size {
		return nil, fmt.Errorf("gguf: %s: file too large to map (%d bytes)", path, size)
	}
	data, err := syscall.Mmap(int(fh.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("gguf: %s: mmap: %w", path, err)
	}
	f, err := parse(data)
	if err != nil {
		syscall.Munmap(data)
		return nil, fmt.Errorf("gguf: %s: %w", path, err)
	}
	f.unmap = func() error { return syscall.Munmap(data) }
	return f, nil
}
