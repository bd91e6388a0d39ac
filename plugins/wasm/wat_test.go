package wasm

import (
	"github.com/minfer/minfer/internal/wasmtest"
	"github.com/minfer/minfer/sdk"
)

// Hostile test modules, assembled by internal/wasmtest.

var (
	i32c = wasmtest.I32Const
	i64c = wasmtest.I64Const
)

const addrResp = wasmtest.AddrResp

// hostile describes a module whose policy export does something bad.
type hostile struct {
	abiExport string // default sdk.ExportABI
	minor     int32
	info      []byte // default: one policy "evil"
	policy    []byte // body of minfer_policy_next
	resp      []byte // data at addrResp
	extra     []wasmtest.Func
}

func (h hostile) bytes() []byte {
	if h.info == nil {
		h.info = wasmtest.PolicyInfo("evil", "0", h.minor)
	}
	return wasmtest.Plugin{ABIExport: h.abiExport, Minor: h.minor, Info: h.info, Err: []byte("evil says no"),
		Policy: h.policy, Resp: h.resp, Extra: h.extra}.Bytes()
}

// Bodies of minfer_policy_next.
var (
	bodyOK      = i64c(sdk.Pack(addrResp, 16))
	bodyOKv10   = i64c(sdk.Pack(addrResp, 12))                                                                                           // a v1.0 response: no flags
	bodyLoop    = []byte{0x03, 0x40, 0x0c, 0x00, 0x0b, 0x00}                                                                             // loop br 0 end; unreachable
	bodyTrap    = []byte{0x00}                                                                                                           // unreachable
	bodyMemBomb = append(append([]byte{0x03, 0x40}, append(i32c(16), 0x40, 0x00)...), append(i32c(-1), 0x47, 0x0d, 0x00, 0x0b, 0x00)...) // grow 1 MiB until refused, then trap
	bodyOutside = i64c(sdk.Pack(0x7fff0000, 100))
	bodyErr     = i64c(-1)
	// count to 20M in memory at 0 (tens of ms), then answer like bodyOK
	bodySlow = append(append(append([]byte{0x03, 0x40}, i32c(0)...), append(append(i32c(0), 0x28, 0x02, 0x00), append(i32c(1), 0x6a, 0x36, 0x02, 0x00)...)...),
		append(append(append(i32c(0), 0x28, 0x02, 0x00), append(i32c(20_000_000), 0x49, 0x0d, 0x00, 0x0b)...), bodyOK...)...)
)
