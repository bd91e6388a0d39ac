//go:build !(linux && (amd64 || arm64))

package driver

import (
	"fmt"
	"runtime"
)

func dlopen(what string, names []string) (uintptr, string, error) {
	return 0, "", fmt.Errorf("cuda: %s not found (CUDA is supported on linux/amd64 and linux/arm64, not %s/%s)", what, runtime.GOOS, runtime.GOARCH)
}

func dlsym(h uintptr, name string) uintptr { return 0 }

func call(fn uintptr, args ...uintptr) uintptr {
	panic("BUG: cuda: driver call on an unsupported platform")
}

func nvrtcCandidates() []string { return nil }

func errorString(fn uintptr, code uintptr) string { return "" }
