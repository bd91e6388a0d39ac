// Package driver binds the CUDA driver API (libcuda.so.1) and NVRTC (libnvrtc.so) at run
// time with purego, so minfer builds with CGO_ENABLED=0 and runs on machines without a
// GPU: there Init returns an error ("cuda: libcuda.so.1 not found …"), never a crash.
//
// It knows nothing about models: contexts, device memory, streams, events, modules
// compiled by NVRTC from the embedded kernel sources (see Compile and package kernels),
// launches and graphs. Every failed driver call becomes an *Error naming the call and
// its CUresult.
//
// # Threads
//
// A CUDA context is current per OS thread. Callers that drive the GPU from a goroutine
// must call Context.Enter (which locks the goroutine to its OS thread and makes the
// context current) and the returned leave function when done.
package driver

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"
)

// drv holds the driver entry points; zero where the symbol is absent.
var drv struct {
	cuInit, cuDriverGetVersion, cuGetErrorName                                     uintptr
	cuDeviceGet, cuDeviceGetCount, cuDeviceGetName, cuDeviceGetAttribute           uintptr
	cuDeviceTotalMem, cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRelease          uintptr
	cuCtxSetCurrent, cuCtxSynchronize                                              uintptr
	cuMemAlloc, cuMemFree, cuMemGetInfo                                            uintptr
	cuMemcpyHtoD, cuMemcpyDtoH, cuMemcpyHtoDAsync, cuMemcpyDtoHAsync               uintptr
	cuMemcpyDtoDAsync, cuMemsetD32Async, cuMemsetD8Async                           uintptr
	cuStreamCreate, cuStreamDestroy, cuStreamSynchronize                           uintptr
	cuStreamBeginCapture, cuStreamEndCapture                                       uintptr
	cuEventCreate, cuEventRecord, cuEventSynchronize, cuEventElapsedTime           uintptr
	cuEventDestroy                                                                 uintptr
	cuModuleLoadData, cuModuleGetFunction, cuModuleUnload, cuFuncSetAttribute      uintptr
	cuFuncGetAttribute                                                             uintptr
	cuLaunchKernel, cuLaunchKernelEx                                               uintptr
	cuMemHostAlloc, cuMemFreeHost                                                  uintptr
	cuGraphInstantiateWithFlags, cuGraphLaunch, cuGraphExecDestroy, cuGraphDestroy uintptr
}

var (
	initOnce sync.Once
	initErr  error
	libName  string
)

// Init loads libcuda.so.1 and calls cuInit(0). It is safe to call many times; the
// first result sticks. Without a driver it returns an error starting
// "cuda: libcuda.so.1 not found".
func Init() error {
	initOnce.Do(func() { initErr = load() })
	return initErr
}

func load() error {
	h, name, err := dlopen("libcuda.so.1", []string{"libcuda.so.1", "libcuda.so"})
	if err != nil {
		return err
	}
	libName = name
	syms := []struct {
		p     *uintptr
		names []string // first found wins
		need  bool
	}{
		{&drv.cuInit, []string{"cuInit"}, true},
		{&drv.cuDriverGetVersion, []string{"cuDriverGetVersion"}, true},
		{&drv.cuGetErrorName, []string{"cuGetErrorName"}, false},
		{&drv.cuDeviceGet, []string{"cuDeviceGet"}, true},
		{&drv.cuDeviceGetCount, []string{"cuDeviceGetCount"}, true},
		{&drv.cuDeviceGetName, []string{"cuDeviceGetName"}, true},
		{&drv.cuDeviceGetAttribute, []string{"cuDeviceGetAttribute"}, true},
		{&drv.cuDeviceTotalMem, []string{"cuDeviceTotalMem_v2"}, true},
		{&drv.cuDevicePrimaryCtxRetain, []string{"cuDevicePrimaryCtxRetain"}, true},
		{&drv.cuDevicePrimaryCtxRelease, []string{"cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"}, true},
		{&drv.cuCtxSetCurrent, []string{"cuCtxSetCurrent"}, true},
		{&drv.cuCtxSynchronize, []string{"cuCtxSynchronize"}, true},
		{&drv.cuMemAlloc, []string{"cuMemAlloc_v2"}, true},
		{&drv.cuMemFree, []string{"cuMemFree_v2"}, true},
		{&drv.cuMemGetInfo, []string{"cuMemGetInfo_v2"}, true},
		{&drv.cuMemcpyHtoD, []string{"cuMemcpyHtoD_v2"}, true},
		{&drv.cuMemcpyDtoH, []string{"cuMemcpyDtoH_v2"}, true},
		{&drv.cuMemcpyHtoDAsync, []string{"cuMemcpyHtoDAsync_v2"}, true},
		{&drv.cuMemcpyDtoHAsync, []string{"cuMemcpyDtoHAsync_v2"}, true},
		{&drv.cuMemcpyDtoDAsync, []string{"cuMemcpyDtoDAsync_v2"}, true},
		{&drv.cuMemsetD32Async, []string{"cuMemsetD32Async"}, true},
		{&drv.cuMemsetD8Async, []string{"cuMemsetD8Async"}, true},
		{&drv.cuStreamCreate, []string{"cuStreamCreate"}, true},
		{&drv.cuStreamDestroy, []string{"cuStreamDestroy_v2"}, true},
		{&drv.cuStreamSynchronize, []string{"cuStreamSynchronize"}, true},
		{&drv.cuStreamBeginCapture, []string{"cuStreamBeginCapture_v2"}, true},
		{&drv.cuStreamEndCapture, []string{"cuStreamEndCapture"}, true},
		{&drv.cuEventCreate, []string{"cuEventCreate"}, true},
		{&drv.cuEventRecord, []string{"cuEventRecord"}, true},
		{&drv.cuEventSynchronize, []string{"cuEventSynchronize"}, true},
		{&drv.cuEventElapsedTime, []string{"cuEventElapsedTime_v2", "cuEventElapsedTime"}, true},
		{&drv.cuEventDestroy, []string{"cuEventDestroy_v2"}, true},
		{&drv.cuModuleLoadData, []string{"cuModuleLoadData"}, true},
		{&drv.cuModuleGetFunction, []string{"cuModuleGetFunction"}, true},
		{&drv.cuModuleUnload, []string{"cuModuleUnload"}, true},
		{&drv.cuFuncSetAttribute, []string{"cuFuncSetAttribute"}, true},
		{&drv.cuFuncGetAttribute, []string{"cuFuncGetAttribute"}, true},
		{&drv.cuLaunchKernel, []string{"cuLaunchKernel"}, true},
		{&drv.cuLaunchKernelEx, []string{"cuLaunchKernelEx"}, false}, // CUDA 12.0+: PDL
		{&drv.cuMemHostAlloc, []string{"cuMemHostAlloc"}, true},
		{&drv.cuMemFreeHost, []string{"cuMemFreeHost"}, true},
		{&drv.cuGraphInstantiateWithFlags, []string{"cuGraphInstantiateWithFlags"}, true},
		{&drv.cuGraphLaunch, []string{"cuGraphLaunch"}, true},
		{&drv.cuGraphExecDestroy, []string{"cuGraphExecDestroy"}, true},
		{&drv.cuGraphDestroy, []string{"cuGraphDestroy"}, true},
	}
	for _, s := range syms {
		for _, n := range s.names {
			if *s.p = dlsym(h, n); *s.p != 0 {
				break
			}
		}
		if *s.p == 0 && s.need {
			return fmt.Errorf("cuda: %s has no symbol %s (driver too old?)", name, s.names[0])
		}
	}
	if err := check("cuInit", call(drv.cuInit, 0)); err != nil {
		if e := (*Error)(nil); errors.As(err, &e) && e.Code == 100 {
			return fmt.Errorf("cuda: no CUDA device: the driver (%s) is installed but sees no GPU: %w", name, err)
		}
		return err
	}
	return nil
}

// DriverVersion is the driver's CUDA version as major*1000 + minor*10 (13000 for 13.0).
func DriverVersion() (int, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	var v int32
	err := check("cuDriverGetVersion", call(drv.cuDriverGetVersion, uintptr(unsafe.Pointer(&v))))
	return int(v), err
}

// DeviceCount is the number of CUDA devices the driver sees.
func DeviceCount() (int, error) {
	if err := Init(); err != nil {
		return 0, err
	}
	var n int32
	err := check("cuDeviceGetCount", call(drv.cuDeviceGetCount, uintptr(unsafe.Pointer(&n))))
	return int(n), err
}
