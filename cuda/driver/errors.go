package driver

import (
	"errors"
	"fmt"
)

// Result is a CUDA driver API status code (CUresult).
type Result int32

// resultNames holds the CUresult names minfer may meet; others print as CUDA_ERROR_<n>.
var resultNames = map[Result]string{
	0:   "CUDA_SUCCESS",
	1:   "CUDA_ERROR_INVALID_VALUE",
	2:   "CUDA_ERROR_OUT_OF_MEMORY",
	3:   "CUDA_ERROR_NOT_INITIALIZED",
	4:   "CUDA_ERROR_DEINITIALIZED",
	34:  "CUDA_ERROR_STUB_LIBRARY",
	35:  "CUDA_ERROR_INSUFFICIENT_DRIVER",
	46:  "CUDA_ERROR_DEVICE_UNAVAILABLE",
	100: "CUDA_ERROR_NO_DEVICE",
	101: "CUDA_ERROR_INVALID_DEVICE",
	200: "CUDA_ERROR_INVALID_IMAGE",
	201: "CUDA_ERROR_INVALID_CONTEXT",
	209: "CUDA_ERROR_NO_BINARY_FOR_GPU",
	218: "CUDA_ERROR_INVALID_PTX",
	222: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
	300: "CUDA_ERROR_INVALID_SOURCE",
	301: "CUDA_ERROR_FILE_NOT_FOUND",
	400: "CUDA_ERROR_INVALID_HANDLE",
	401: "CUDA_ERROR_ILLEGAL_STATE",
	500: "CUDA_ERROR_NOT_FOUND",
	600: "CUDA_ERROR_NOT_READY",
	700: "CUDA_ERROR_ILLEGAL_ADDRESS",
	701: "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
	702: "CUDA_ERROR_LAUNCH_TIMEOUT",
	715: "CUDA_ERROR_ILLEGAL_INSTRUCTION",
	716: "CUDA_ERROR_MISALIGNED_ADDRESS",
	719: "CUDA_ERROR_LAUNCH_FAILED",
	900: "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
	901: "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
	902: "CUDA_ERROR_STREAM_CAPTURE_MERGE",
	903: "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED",
	904: "CUDA_ERROR_STREAM_CAPTURE_UNJOINED",
	905: "CUDA_ERROR_STREAM_CAPTURE_ISOLATION",
	906: "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT",
	908: "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD",
	910: "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE",
	999: "CUDA_ERROR_UNKNOWN",
}

// String is the CUresult's enum name.
func (r Result) String() string {
	if s, ok := resultNames[r]; ok {
		return s
	}
	return fmt.Sprintf("CUDA_ERROR_%d", int32(r))
}

// Error is a failed driver call: the function called and the status it returned.
type Error struct {
	Call string
	Code Result
}

func (e *Error) Error() string {
	return fmt.Sprintf("cuda: %s: %s (%d)", e.Call, e.Code, int32(e.Code))
}

// IsOutOfMemory reports whether err is a driver CUDA_ERROR_OUT_OF_MEMORY.
func IsOutOfMemory(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == 2
}

// check turns a driver status into an error naming the call.
func check(call string, r uintptr) error {
	if Result(int32(r)) == 0 {
		return nil
	}
	return &Error{Call: call, Code: Result(int32(r))}
}
