//go:build !unix

package gguf

import (
	"fmt"
	"os"
)

// Open reads the file at path into memory (no mmap on this platform) and parses it.
// Errors read "gguf: PATH: problem".
func Open(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	f, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("gguf: %s: %w", path, err)
	}
	return f, nil
}
