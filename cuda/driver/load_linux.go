//go:build linux && (amd64 || arm64)

package driver

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ebitengine/purego"
)

// dlopen loads the first library of names that opens; it reports every failure.
func dlopen(what string, names []string) (uintptr, string, error) {
	var fails []string
	for _, n := range names {
		h, err := purego.Dlopen(n, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err == nil {
			return h, n, nil
		}
		fails = append(fails, err.Error())
	}
	return 0, "", fmt.Errorf("cuda: %s not found (%s)", what, strings.Join(fails, "; "))
}

func dlsym(h uintptr, name string) uintptr {
	p, err := purego.Dlsym(h, name)
	if err != nil {
		return 0
	}
	return p
}

// call invokes a C function. Out-parameters must be passed as
// uintptr(unsafe.Pointer(&x)) written in the call's argument list: uintptrescapes then
// moves x to the heap, so a stack move during the call cannot strand the C write.
//
//go:uintptrescapes
func call(fn uintptr, args ...uintptr) uintptr {
	r, _, _ := purego.SyscallN(fn, args...)
	return r
}

// nvrtcCandidates lists where libnvrtc may live: MINFER_NVRTC first, then the loader's
// search path, then the usual toolkit and pip wheel folders.
func nvrtcCandidates() []string {
	var c []string
	if p := os.Getenv("MINFER_NVRTC"); p != "" {
		c = append(c, p)
	}
	for _, v := range []string{"13", "12", "11.2"} {
		c = append(c, "libnvrtc.so."+v)
	}
	c = append(c, "libnvrtc.so")
	globs := []string{
		"/usr/local/cuda/lib64/libnvrtc.so*",
		"/usr/local/cuda/targets/*/lib/libnvrtc.so*",
		"/usr/local/cuda-*/lib64/libnvrtc.so*",
		"/usr/lib/x86_64-linux-gnu/libnvrtc.so*",
		"/opt/*/.venv/lib/python3*/site-packages/nvidia/cu*/lib/libnvrtc.so*",
		"/opt/*/.venv/lib/python3*/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so*",
		"/usr/local/lib/python3*/dist-packages/nvidia/cu*/lib/libnvrtc.so*",
	}
	for _, g := range globs {
		m, _ := filepath.Glob(g)
		for _, p := range m {
			if !strings.Contains(filepath.Base(p), "builtins") && !strings.Contains(filepath.Base(p), "alt") {
				c = append(c, p)
			}
		}
	}
	return c
}

// errorString calls a C function `const char *f(int)` and copies its result.
func errorString(fn uintptr, code uintptr) string {
	var f func(int32) string
	purego.RegisterFunc(&f, fn)
	return f(int32(code))
}
