//go:build wasip1 && wasm

package guest

import (
	"runtime"
	"unsafe"

	"github.com/minfer/minfer/sdk"
)

var (
	handler Handler
	// bufs keeps the buffers handed to the host by minfer_alloc alive (and findable)
	// until minfer_free.
	bufs    = map[uint32][]byte{}
	lastErr []byte
	// lastPtr and lastBuf cache the latest allocation: the host reuses one buffer, so
	// most calls skip the map.
	lastPtr uint32
	lastBuf []byte
)

func addr(b []byte) uint32 {
	if len(b) == 0 {
		return 0
	}
	return uint32(uintptr(unsafe.Pointer(&b[0])))
}

func pack(b []byte) int64 { return sdk.Pack(addr(b), uint32(len(b))) }

// view returns the first n bytes of the buffer minfer_alloc returned at ptr.
func view(ptr, n int32) ([]byte, bool) {
	if uint32(ptr) == lastPtr && int(n) <= len(lastBuf) {
		return lastBuf[:n], true
	}
	b, ok := bufs[uint32(ptr)]
	if !ok || n < 0 || int(n) > len(b) {
		return nil, false
	}
	return b[:n], true
}

func fail(err error) int64 {
	msg := err.Error()
	if len(msg) > sdk.MaxErrorLen {
		msg = msg[:sdk.MaxErrorLen]
	}
	lastErr = append(lastErr[:0], msg...)
	return -1
}

// yield lets the runtime's own goroutines run before an export returns to the host.
// A reactor module runs Go only inside export calls, and only the calling goroutine
// unless it yields: the garbage collector's background mark worker then never runs,
// a cycle that has started does not finish, and the heap grows until the module's
// memory cap ends it ("fatal error: out of memory": the suffix drafter in
// builtin.wasm after ~900 sequences of 2,048 tokens under the 64 MB default). A
// Gosched with nothing else runnable returns at once.
func yield() { runtime.Gosched() }

func answer(resp []byte, err error) int64 {
	yield()
	if err != nil {
		return fail(err)
	}
	return pack(resp)
}

type badBuffer struct{}

func (badBuffer) Error() string { return "request buffer was not returned by minfer_alloc" }

//go:wasmexport minfer_abi_v1
func abiV1() int32 { return sdk.ABIMinor }

//go:wasmexport minfer_info
func info() int64 { return pack(handler.Info()) }

//go:wasmexport minfer_alloc
func alloc(size int32) int32 {
	if size <= 0 {
		return 0
	}
	b := make([]byte, size)
	bufs[addr(b)] = b
	lastPtr, lastBuf = addr(b), b
	return int32(addr(b))
}

//go:wasmexport minfer_free
func free(ptr, size int32) {
	delete(bufs, uint32(ptr))
	if uint32(ptr) == lastPtr {
		lastPtr, lastBuf = 0, nil
	}
}

//go:wasmexport minfer_last_error
func lastError() int64 { return pack(lastErr) }

//go:wasmexport minfer_init
func initPlugin(ptr, n int32) int32 {
	req, ok := view(ptr, n)
	if !ok {
		fail(badBuffer{})
		return 1
	}
	err := handler.Init(req)
	yield()
	if err != nil {
		fail(err)
		return 1
	}
	return 0
}

//go:wasmexport minfer_policy_next
func policyNext(ptr, n int32) int64 {
	req, ok := view(ptr, n)
	if !ok {
		return fail(badBuffer{})
	}
	return answer(handler.PolicyNext(req))
}

//go:wasmexport minfer_penalty_window
func penaltyWindow() int32 {
	w, err := handler.PenaltyWindow()
	if err != nil {
		fail(err)
		return -1
	}
	if w > 1<<30 {
		w = 1 << 30
	}
	return int32(w)
}

//go:wasmexport minfer_penalty_apply
func penaltyApply(ptr, n int32) int64 {
	req, ok := view(ptr, n)
	if !ok {
		return fail(badBuffer{})
	}
	return answer(handler.PenaltyApply(req))
}

//go:wasmexport minfer_sampler_needs
func samplerNeeds() int32 {
	k, err := handler.SamplerNeeds()
	if err != nil {
		fail(err)
		return -1
	}
	return int32(k)
}

//go:wasmexport minfer_sample
func sample(ptr, n int32) int64 {
	req, ok := view(ptr, n)
	if !ok {
		return fail(badBuffer{})
	}
	return answer(handler.Sample(req))
}

//go:wasmexport minfer_draft
func draft(ptr, n int32) int64 {
	req, ok := view(ptr, n)
	if !ok {
		return fail(badBuffer{})
	}
	return answer(handler.Draft(req))
}
