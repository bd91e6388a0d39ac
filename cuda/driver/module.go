package driver

import (
	"fmt"
	"math"
	"unsafe"
)

// Module is a loaded CUBIN or PTX image.
type Module struct {
	h    uintptr
	name string
}

// LoadModule loads a CUBIN (or NUL-terminated PTX) image into the current context.
func LoadModule(name string, image []byte) (*Module, error) {
	if len(image) == 0 {
		return nil, fmt.Errorf("cuda: module %s: empty image", name)
	}
	m := &Module{name: name}
	if err := check("cuModuleLoadData", call(drv.cuModuleLoadData, uintptr(unsafe.Pointer(&m.h)), uintptr(unsafe.Pointer(&image[0])))); err != nil {
		return nil, fmt.Errorf("module %s: %w", name, err)
	}
	return m, nil
}

// Function looks up a kernel by its (extern "C") name.
func (m *Module) Function(name string) (*Function, error) {
	cname := append([]byte(name), 0)
	f := &Function{name: name}
	if err := check("cuModuleGetFunction", call(drv.cuModuleGetFunction, uintptr(unsafe.Pointer(&f.h)), m.h, uintptr(unsafe.Pointer(&cname[0])))); err != nil {
		return nil, fmt.Errorf("module %s: kernel %s: %w", m.name, name, err)
	}
	return f, nil
}

// Unload releases the module.
func (m *Module) Unload() error {
	if m.h == 0 {
		return nil
	}
	h := m.h
	m.h = 0
	return check("cuModuleUnload", call(drv.cuModuleUnload, h))
}

// Function is a kernel entry point.
type Function struct {
	h    uintptr
	name string
}

// Name is the kernel's name.
func (f *Function) Name() string { return f.name }

// StaticShared is the shared memory every block of the kernel has before any dynamic
// shared memory: its __shared__ variables and what the system reserves (1 KB a block
// from sm_80).
func (f *Function) StaticShared() (int, error) {
	const attrSharedSize = 1 // CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES
	var v int32
	if err := check("cuFuncGetAttribute", call(drv.cuFuncGetAttribute, uintptr(unsafe.Pointer(&v)), attrSharedSize, f.h)); err != nil {
		return 0, err
	}
	return int(v), nil
}

// SetMaxDynamicShared raises the dynamic shared memory a launch may ask for (at most
// the device's opt-in limit less StaticShared).
func (f *Function) SetMaxDynamicShared(bytes int) error {
	const attrMaxDynamicShared = 8 // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
	return check("cuFuncSetAttribute", call(drv.cuFuncSetAttribute, f.h, attrMaxDynamicShared, uintptr(bytes)))
}

// Dim3 is a grid or block shape.
type Dim3 struct{ X, Y, Z int }

// Arg is one kernel argument, held in an 8-byte slot: the driver reads as many bytes
// as the kernel's parameter declares (little-endian, so 4-byte values sit first).
type Arg uint64

// P is a device pointer argument.
func P(p DevicePtr) Arg { return Arg(p) }

// I is an int (32-bit) argument.
func I(v int) Arg {
	if v < math.MinInt32 || v > math.MaxInt32 {
		panic(fmt.Sprintf("BUG: cuda: int argument %d overflows int32", v))
	}
	return Arg(uint32(int32(v)))
}

// F is a float argument.
func F(v float32) Arg { return Arg(math.Float32bits(v)) }

// Launcher enqueues kernels; it owns the argument slots, so one Launcher must not be
// used by two goroutines at once.
type Launcher struct {
	// PDL launches every kernel with programmatic stream serialization (compute 9.0+,
	// CUDA 12 drivers): a kernel may start while the previous one in the stream runs,
	// and waits for it with griddepcontrol.wait (common.cuh grid_dep_sync). Ignored
	// when the driver lacks cuLaunchKernelEx.
	PDL  bool
	vals [48]uint64 // the most arguments a kernel takes (mmvq_KERNELrp_1: 42)
	ptrs [48]uintptr
	cfg  launchConfig
	attr launchAttr
}

// launchConfig is CUlaunchConfig; launchAttr is CUlaunchAttribute (id, padding, and a
// 64-byte value union).
type launchConfig struct {
	gx, gy, gz, bx, by, bz, shared uint32
	_                              uint32
	stream, attrs                  uintptr
	nattrs                         uint32
	_                              uint32
}

type launchAttr struct {
	id  uint32
	_   uint32
	val [64]byte
}

const attrProgrammaticStreamSerialization = 6 // CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION

// PDLSupported reports whether the driver can launch with programmatic dependent
// launch (it has cuLaunchKernelEx); the device must also be compute 9.0 or newer.
func PDLSupported() bool { return drv.cuLaunchKernelEx != 0 }

// Launch enqueues f on s with the given shape, dynamic shared memory and arguments.
func (l *Launcher) Launch(s *Stream, f *Function, grid, block Dim3, shared int, args ...Arg) error {
	if len(args) > len(l.vals) {
		panic("BUG: cuda: too many kernel arguments")
	}
	for i, a := range args {
		l.vals[i] = uint64(a)
		l.ptrs[i] = uintptr(unsafe.Pointer(&l.vals[i]))
	}
	g, b := grid.norm(), block.norm()
	api, r := "cuLaunchKernel", uintptr(0)
	if l.PDL && drv.cuLaunchKernelEx != 0 {
		l.attr = launchAttr{id: attrProgrammaticStreamSerialization}
		l.attr.val[0] = 1 // programmaticStreamSerializationAllowed
		l.cfg = launchConfig{gx: uint32(g.X), gy: uint32(g.Y), gz: uint32(g.Z), bx: uint32(b.X), by: uint32(b.Y), bz: uint32(b.Z),
			shared: uint32(shared), stream: s.h, attrs: uintptr(unsafe.Pointer(&l.attr)), nattrs: 1}
		api, r = "cuLaunchKernelEx", call(drv.cuLaunchKernelEx, uintptr(unsafe.Pointer(&l.cfg)), f.h, uintptr(unsafe.Pointer(&l.ptrs[0])), 0)
	} else {
		r = call(drv.cuLaunchKernel, f.h, uintptr(g.X), uintptr(g.Y), uintptr(g.Z),
			uintptr(b.X), uintptr(b.Y), uintptr(b.Z), uintptr(shared), s.h,
			uintptr(unsafe.Pointer(&l.ptrs[0])), 0)
	}
	if err := check(api, r); err != nil {
		return fmt.Errorf("%s grid %v block %v: %w", f.name, g, b, err)
	}
	return nil
}

func (d Dim3) norm() Dim3 {
	return Dim3{max(d.X, 1), max(d.Y, 1), max(d.Z, 1)}
}
