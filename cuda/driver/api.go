package driver

import (
	"bytes"
	"fmt"
	"runtime"
	"unsafe"
)

// Device attribute ids (CUdevice_attribute).
const (
	attrMaxThreadsPerBlock  = 1
	attrMultiprocessorCount = 16
	attrClockRate           = 13
	attrMemoryClockRate     = 36
	attrBusWidth            = 37
	attrL2CacheSize         = 38
	attrCCMajor             = 75
	attrCCMinor             = 76
	attrMaxSharedOptin      = 97
)

// Props are the device facts kernels and choosers need.
type Props struct {
	Name               string
	Major, Minor       int // compute capability
	SMs                int // multiprocessors
	L2Bytes            int // L2 cache size
	SharedOptin        int // largest shared memory a block may opt in to
	MaxThreadsPerBlock int
	ClockKHz           int
	MemClockKHz        int
	BusWidthBits       int
	TotalMem           int64
}

// Arch is the NVRTC target name of the exact architecture ("sm_90").
func (p Props) Arch() string { return fmt.Sprintf("sm_%d%d", p.Major, p.Minor) }

// PeakBandwidth is the datasheet memory bandwidth in bytes/s from clocks and bus width
// (0 when the driver does not report them).
func (p Props) PeakBandwidth() float64 {
	return 2 * float64(p.MemClockKHz) * 1e3 * float64(p.BusWidthBits) / 8
}

// Context is the primary context of one device, retained until Close.
type Context struct {
	dev   int32
	ctx   uintptr
	Props Props
}

// NewContext retains device ord's primary context and reads its properties.
func NewContext(ord int) (*Context, error) {
	n, err := DeviceCount()
	if err != nil {
		return nil, err
	}
	if ord < 0 || ord >= n {
		return nil, fmt.Errorf("cuda: device %d does not exist (%d device(s))", ord, n)
	}
	c := &Context{}
	if err := check("cuDeviceGet", call(drv.cuDeviceGet, uintptr(unsafe.Pointer(&c.dev)), uintptr(ord))); err != nil {
		return nil, err
	}
	if err := check("cuDevicePrimaryCtxRetain", call(drv.cuDevicePrimaryCtxRetain, uintptr(unsafe.Pointer(&c.ctx)), uintptr(c.dev))); err != nil {
		return nil, err
	}
	leave := c.Enter()
	defer leave()
	if err := c.readProps(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (c *Context) readProps() error {
	var name [256]byte
	if err := check("cuDeviceGetName", call(drv.cuDeviceGetName, uintptr(unsafe.Pointer(&name[0])), 256, uintptr(c.dev))); err != nil {
		return err
	}
	c.Props.Name = string(name[:max(0, bytes.IndexByte(name[:], 0))])
	attrs := []struct {
		id  int
		dst *int
	}{
		{attrCCMajor, &c.Props.Major}, {attrCCMinor, &c.Props.Minor},
		{attrMultiprocessorCount, &c.Props.SMs}, {attrL2CacheSize, &c.Props.L2Bytes},
		{attrMaxSharedOptin, &c.Props.SharedOptin}, {attrMaxThreadsPerBlock, &c.Props.MaxThreadsPerBlock},
		{attrClockRate, &c.Props.ClockKHz}, {attrMemoryClockRate, &c.Props.MemClockKHz},
		{attrBusWidth, &c.Props.BusWidthBits},
	}
	for _, a := range attrs {
		var v int32
		if err := check("cuDeviceGetAttribute", call(drv.cuDeviceGetAttribute, uintptr(unsafe.Pointer(&v)), uintptr(a.id), uintptr(c.dev))); err != nil {
			return fmt.Errorf("attribute %d: %w", a.id, err)
		}
		*a.dst = int(v)
	}
	var total uint64
	if err := check("cuDeviceTotalMem", call(drv.cuDeviceTotalMem, uintptr(unsafe.Pointer(&total)), uintptr(c.dev))); err != nil {
		return err
	}
	c.Props.TotalMem = int64(total)
	return nil
}

// Enter locks the calling goroutine to its OS thread and makes the context current
// there; call the returned function when the goroutine stops driving the GPU.
func (c *Context) Enter() (leave func()) {
	runtime.LockOSThread()
	call(drv.cuCtxSetCurrent, c.ctx)
	return runtime.UnlockOSThread
}

// Close releases the primary context.
func (c *Context) Close() error {
	if c.ctx == 0 {
		return nil
	}
	c.ctx = 0
	return check("cuDevicePrimaryCtxRelease", call(drv.cuDevicePrimaryCtxRelease, uintptr(c.dev)))
}

// Synchronize waits for all work of the context.
func (c *Context) Synchronize() error {
	return check("cuCtxSynchronize", call(drv.cuCtxSynchronize))
}

// MemInfo returns the free and total device memory in bytes.
func (c *Context) MemInfo() (free, total int64, err error) {
	var f, t uint64
	err = check("cuMemGetInfo", call(drv.cuMemGetInfo, uintptr(unsafe.Pointer(&f)), uintptr(unsafe.Pointer(&t))))
	return int64(f), int64(t), err
}

// DevicePtr is a device address (CUdeviceptr).
type DevicePtr uintptr

// Alloc allocates n bytes of plain device memory (cuMemAlloc; never managed memory).
func Alloc(n int64) (DevicePtr, error) {
	if n <= 0 {
		n = 1
	}
	var p DevicePtr
	if err := check("cuMemAlloc", call(drv.cuMemAlloc, uintptr(unsafe.Pointer(&p)), uintptr(n))); err != nil {
		return 0, fmt.Errorf("%w (%d bytes)", err, n)
	}
	return p, nil
}

// Free releases memory from Alloc.
func Free(p DevicePtr) error {
	if p == 0 {
		return nil
	}
	return check("cuMemFree", call(drv.cuMemFree, uintptr(p)))
}

// CopyHtoD copies src to device address dst synchronously.
func CopyHtoD(dst DevicePtr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return check("cuMemcpyHtoD", call(drv.cuMemcpyHtoD, uintptr(dst), uintptr(unsafe.Pointer(&src[0])), uintptr(len(src))))
}

// CopyDtoH copies len(dst) bytes from device address src synchronously.
func CopyDtoH(dst []byte, src DevicePtr) error {
	if len(dst) == 0 {
		return nil
	}
	return check("cuMemcpyDtoH", call(drv.cuMemcpyDtoH, uintptr(unsafe.Pointer(&dst[0])), uintptr(src), uintptr(len(dst))))
}

// Stream is a CUDA stream.
type Stream struct{ h uintptr }

// NewStream creates a non-blocking stream (no implicit sync with the legacy stream).
func NewStream() (*Stream, error) {
	s := &Stream{}
	err := check("cuStreamCreate", call(drv.cuStreamCreate, uintptr(unsafe.Pointer(&s.h)), 1))
	return s, err
}

// Handle is the raw CUstream.
func (s *Stream) Handle() uintptr { return s.h }

// Destroy releases the stream.
func (s *Stream) Destroy() error {
	if s.h == 0 {
		return nil
	}
	h := s.h
	s.h = 0
	return check("cuStreamDestroy", call(drv.cuStreamDestroy, h))
}

// Synchronize waits for the stream's work.
func (s *Stream) Synchronize() error {
	return check("cuStreamSynchronize", call(drv.cuStreamSynchronize, s.h))
}

// CopyHtoD enqueues a copy of src to dst. src may be reused once it returns (the
// driver stages pageable memory before returning).
func (s *Stream) CopyHtoD(dst DevicePtr, src unsafe.Pointer, n int) error {
	if n == 0 {
		return nil
	}
	return check("cuMemcpyHtoDAsync", call(drv.cuMemcpyHtoDAsync, uintptr(dst), uintptr(src), uintptr(n), s.h))
}

// CopyDtoH enqueues a copy of n bytes from src to host memory dst; dst must stay alive
// and untouched until the stream is synchronized.
func (s *Stream) CopyDtoH(dst unsafe.Pointer, src DevicePtr, n int) error {
	if n == 0 {
		return nil
	}
	return check("cuMemcpyDtoHAsync", call(drv.cuMemcpyDtoHAsync, uintptr(dst), uintptr(src), uintptr(n), s.h))
}

// CopyDtoD enqueues a device-to-device copy of n bytes.
func (s *Stream) CopyDtoD(dst, src DevicePtr, n int) error {
	if n == 0 {
		return nil
	}
	return check("cuMemcpyDtoDAsync", call(drv.cuMemcpyDtoDAsync, uintptr(dst), uintptr(src), uintptr(n), s.h))
}

// Memset32 enqueues filling n 32-bit words at dst with v.
func (s *Stream) Memset32(dst DevicePtr, v uint32, n int) error {
	if n == 0 {
		return nil
	}
	return check("cuMemsetD32Async", call(drv.cuMemsetD32Async, uintptr(dst), uintptr(v), uintptr(n), s.h))
}

// Capture modes (CUstreamCaptureMode).
const (
	CaptureGlobal  = 0
	CaptureThread  = 1
	CaptureRelaxed = 2
)

// BeginCapture starts recording the stream's work into a graph.
func (s *Stream) BeginCapture(mode int) error {
	return check("cuStreamBeginCapture", call(drv.cuStreamBeginCapture, s.h, uintptr(mode)))
}

// EndCapture stops recording and instantiates the captured graph.
func (s *Stream) EndCapture() (*Graph, error) {
	var g uintptr
	if err := check("cuStreamEndCapture", call(drv.cuStreamEndCapture, s.h, uintptr(unsafe.Pointer(&g)))); err != nil {
		return nil, err
	}
	defer call(drv.cuGraphDestroy, g)
	var exec uintptr
	if err := check("cuGraphInstantiateWithFlags", call(drv.cuGraphInstantiateWithFlags, uintptr(unsafe.Pointer(&exec)), g, 0)); err != nil {
		return nil, err
	}
	return &Graph{exec: exec}, nil
}

// Graph is an instantiated CUDA graph (CUgraphExec).
type Graph struct{ exec uintptr }

// Launch enqueues one replay of the graph on s.
func (g *Graph) Launch(s *Stream) error {
	return check("cuGraphLaunch", call(drv.cuGraphLaunch, g.exec, s.h))
}

// Destroy releases the graph.
func (g *Graph) Destroy() error {
	if g.exec == 0 {
		return nil
	}
	e := g.exec
	g.exec = 0
	return check("cuGraphExecDestroy", call(drv.cuGraphExecDestroy, e))
}

// Event is a CUDA event with timing.
type Event struct{ h uintptr }

// NewEvent creates a timing event.
func NewEvent() (*Event, error) {
	e := &Event{}
	err := check("cuEventCreate", call(drv.cuEventCreate, uintptr(unsafe.Pointer(&e.h)), 0))
	return e, err
}

// Record enqueues the event on s.
func (e *Event) Record(s *Stream) error {
	return check("cuEventRecord", call(drv.cuEventRecord, e.h, s.h))
}

// Synchronize waits for the event.
func (e *Event) Synchronize() error {
	return check("cuEventSynchronize", call(drv.cuEventSynchronize, e.h))
}

// Elapsed is the time in milliseconds from start to end (both recorded and done).
func Elapsed(start, end *Event) (float32, error) {
	var ms float32
	err := check("cuEventElapsedTime", call(drv.cuEventElapsedTime, uintptr(unsafe.Pointer(&ms)), start.h, end.h))
	return ms, err
}

// Destroy releases the event.
func (e *Event) Destroy() error {
	if e.h == 0 {
		return nil
	}
	h := e.h
	e.h = 0
	return check("cuEventDestroy", call(drv.cuEventDestroy, h))
}
