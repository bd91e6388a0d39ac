// Package kernels holds minfer's CUDA C++ sources, one op per .cu file plus the shared
// common.cuh, embedded so the binary carries them; package cuda/driver compiles them with NVRTC
// for the device's exact architecture on first use.
package kernels

import (
	"embed"
	"fmt"
	"io/fs"
	"slices"
	"strings"
)

//go:embed *.cu *.cuh
var files embed.FS

// Names lists the .cu sources, sorted.
func Names() []string {
	ents, _ := fs.ReadDir(files, ".")
	var n []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".cu") {
			n = append(n, e.Name())
		}
	}
	slices.Sort(n)
	return n
}

// Source returns a .cu file's text and every header it may include.
func Source(name string) (code []byte, headers map[string][]byte, err error) {
	code, err = files.ReadFile(name)
	if err != nil {
		return nil, nil, fmt.Errorf("kernels: %s: %w", name, err)
	}
	headers = map[string][]byte{}
	ents, _ := fs.ReadDir(files, ".")
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".cuh") {
			b, _ := files.ReadFile(e.Name())
			headers[e.Name()] = b
		}
	}
	return code, headers, nil
}
