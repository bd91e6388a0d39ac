package driver

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"
)

var nvrtc struct {
	once                                                              sync.Once
	err                                                               error
	lib                                                               string
	major, minor                                                      int
	version, create, compile, destroy, logSize, log, cubinSize, cubin uintptr
	errString                                                         uintptr
}

func loadNVRTC() error {
	nvrtc.once.Do(func() {
		h, name, err := dlopen("libnvrtc.so", nvrtcCandidates())
		if err != nil {
			nvrtc.err = fmt.Errorf("%w (set MINFER_NVRTC to its path)", err)
			return
		}
		nvrtc.lib = name
		syms := []struct {
			p    *uintptr
			name string
		}{
			{&nvrtc.version, "nvrtcVersion"}, {&nvrtc.create, "nvrtcCreateProgram"},
			{&nvrtc.compile, "nvrtcCompileProgram"}, {&nvrtc.destroy, "nvrtcDestroyProgram"},
			{&nvrtc.logSize, "nvrtcGetProgramLogSize"}, {&nvrtc.log, "nvrtcGetProgramLog"},
			{&nvrtc.cubinSize, "nvrtcGetCUBINSize"}, {&nvrtc.cubin, "nvrtcGetCUBIN"},
			{&nvrtc.errString, "nvrtcGetErrorString"},
		}
		for _, s := range syms {
			if *s.p = dlsym(h, s.name); *s.p == 0 {
				nvrtc.err = fmt.Errorf("cuda: %s has no symbol %s", name, s.name)
				return
			}
		}
		var maj, min int32
		if r := call(nvrtc.version, uintptr(unsafe.Pointer(&maj)), uintptr(unsafe.Pointer(&min))); int32(r) != 0 {
			nvrtc.err = nvrtcError("nvrtcVersion", r)
			return
		}
		nvrtc.major, nvrtc.minor = int(maj), int(min)
	})
	return nvrtc.err
}

// NVRTCVersion loads NVRTC and returns its version.
func NVRTCVersion() (major, minor int, err error) {
	if err := loadNVRTC(); err != nil {
		return 0, 0, err
	}
	return nvrtc.major, nvrtc.minor, nil
}

func nvrtcError(callName string, r uintptr) error {
	msg := fmt.Sprintf("status %d", int32(r))
	if nvrtc.errString != 0 {
		if m := errorString(nvrtc.errString, r); m != "" {
			msg = m
		}
	}
	return fmt.Errorf("cuda: %s: %s", callName, msg)
}

// Source is one CUDA C++ translation unit and the headers it includes by name.
type Source struct {
	Name    string            // e.g. "mmvq.cu"
	Code    []byte            // the .cu text
	Headers map[string][]byte // include name → text
}

// CompileOptions says how and where to compile.
type CompileOptions struct {
	Arch     string    // exact target, e.g. "sm_90"
	Defines  []string  // "NAME=VALUE" or "NAME", passed as -D
	CacheDir string    // "" = DefaultCacheDir()
	Log      io.Writer // a progress line per compiled (not cached) source; nil = quiet
}

// DefaultCacheDir is $MINFER_CACHE_DIR, else the user cache dir + "/minfer/cuda".
func DefaultCacheDir() string {
	if d := os.Getenv("MINFER_CACHE_DIR"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "minfer", "cuda")
	}
	return filepath.Join(os.TempDir(), "minfer-cuda")
}

// CacheKey is the disk-cache key of a compile: it covers the source and headers, the
// architecture, the defines and the NVRTC version, so changing any recompiles.
func CacheKey(src Source, arch string, defines []string, nvrtcVersion string) string {
	h := sha256.New()
	fmt.Fprintf(h, "minfer-cuda-v1\x00%s\x00%d\x00", src.Name, len(src.Code))
	h.Write(src.Code)
	names := make([]string, 0, len(src.Headers))
	for n := range src.Headers {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(h, "\x00%s\x00%d\x00", n, len(src.Headers[n]))
		h.Write(src.Headers[n])
	}
	d := slices.Clone(defines)
	slices.Sort(d)
	fmt.Fprintf(h, "\x00%s\x00%s\x00%s", arch, strings.Join(d, "\x01"), nvrtcVersion)
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// Compile returns the CUBIN of src for opts.Arch, from the disk cache when present,
// else compiled by NVRTC and stored. Compile errors carry NVRTC's log.
func Compile(src Source, opts CompileOptions) ([]byte, error) {
	if err := loadNVRTC(); err != nil {
		return nil, err
	}
	if opts.Arch == "" {
		return nil, fmt.Errorf("cuda: compile %s: no target architecture", src.Name)
	}
	dir := opts.CacheDir
	if dir == "" {
		dir = DefaultCacheDir()
	}
	key := CacheKey(src, opts.Arch, opts.Defines, fmt.Sprintf("%d.%d", nvrtc.major, nvrtc.minor))
	file := filepath.Join(dir, fmt.Sprintf("%s-%s-%s.cubin", strings.TrimSuffix(src.Name, ".cu"), opts.Arch, key))
	if b, err := os.ReadFile(file); err == nil && len(b) > 0 {
		return b, nil
	}
	start := time.Now()
	bin, err := nvrtcCompile(src, opts)
	if err != nil {
		return nil, err
	}
	if opts.Log != nil {
		fmt.Fprintf(opts.Log, "cuda: compiled %s for %s with NVRTC %d.%d in %v (first use; cached in %s)\n",
			src.Name, opts.Arch, nvrtc.major, nvrtc.minor, time.Since(start).Round(time.Millisecond), dir)
	}
	// A cache that cannot be written only costs a recompile next time.
	if err := os.MkdirAll(dir, 0o755); err == nil {
		tmp := fmt.Sprintf("%s.tmp%d", file, os.Getpid())
		if os.WriteFile(tmp, bin, 0o644) == nil {
			_ = os.Rename(tmp, file)
		}
	}
	return bin, nil
}

func nvrtcCompile(src Source, opts CompileOptions) ([]byte, error) {
	var keep [][]byte // C strings referenced from uintptr arrays below
	cstr := func(s []byte) uintptr {
		b := append(slices.Clone(s), 0)
		keep = append(keep, b)
		return uintptr(unsafe.Pointer(&b[0]))
	}
	names := make([]string, 0, len(src.Headers))
	for n := range src.Headers {
		names = append(names, n)
	}
	slices.Sort(names)
	hdrs := make([]uintptr, len(names)+1)
	incs := make([]uintptr, len(names)+1)
	for i, n := range names {
		hdrs[i] = cstr(src.Headers[n])
		incs[i] = cstr([]byte(n))
	}
	var prog uintptr
	if r := call(nvrtc.create, uintptr(unsafe.Pointer(&prog)), cstr(src.Code), cstr([]byte(src.Name)), uintptr(len(names)),
		uintptr(unsafe.Pointer(&hdrs[0])), uintptr(unsafe.Pointer(&incs[0]))); int32(r) != 0 {
		return nil, nvrtcError("nvrtcCreateProgram", r)
	}
	defer func() { call(nvrtc.destroy, uintptr(unsafe.Pointer(&prog))) }()
	args := []string{"--gpu-architecture=" + opts.Arch, "-std=c++17", "--fmad=true"}
	for _, d := range opts.Defines {
		args = append(args, "-D"+d)
	}
	argv := make([]uintptr, len(args)+1)
	for i, a := range args {
		argv[i] = cstr([]byte(a))
	}
	r := call(nvrtc.compile, prog, uintptr(len(args)), uintptr(unsafe.Pointer(&argv[0])))
	runtime.KeepAlive(keep)
	if int32(r) != 0 {
		return nil, fmt.Errorf("%w: %s: %s", nvrtcError("nvrtcCompileProgram", r), src.Name, programLog(prog))
	}
	var n uintptr
	if r := call(nvrtc.cubinSize, prog, uintptr(unsafe.Pointer(&n))); int32(r) != 0 {
		return nil, nvrtcError("nvrtcGetCUBINSize", r)
	}
	bin := make([]byte, n)
	if n == 0 {
		return nil, fmt.Errorf("cuda: nvrtc produced no CUBIN for %s", src.Name)
	}
	if r := call(nvrtc.cubin, prog, uintptr(unsafe.Pointer(&bin[0]))); int32(r) != 0 {
		return nil, nvrtcError("nvrtcGetCUBIN", r)
	}
	return bin, nil
}

func programLog(prog uintptr) string {
	var n uintptr
	if int32(call(nvrtc.logSize, prog, uintptr(unsafe.Pointer(&n)))) != 0 || n <= 1 {
		return "(no log)"
	}
	b := make([]byte, n)
	if int32(call(nvrtc.log, prog, uintptr(unsafe.Pointer(&b[0])))) != 0 {
		return "(no log)"
	}
	return strings.TrimRight(string(b), "\x00\n")
}
