package wasm

import (
	"encoding/binary"

	"github.com/minfer/minfer/sdk"
)

// A tiny WebAssembly assembler for hostile test modules: each module has one page of
// memory, the ABI exports with fixed bodies, and data segments.

type wfunc struct {
	name    string
	params  []byte // value types: 0x7f i32, 0x7e i64
	results []byte
	body    []byte // instructions, without the final end
}

type wdata struct {
	off  uint32
	data []byte
}

func uleb(dst []byte, v uint64) []byte {
	for {
		b := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			dst = append(dst, b|0x80)
			continue
		}
		return append(dst, b)
	}
}

func sleb(dst []byte, v int64) []byte {
	for {
		b := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && b&0x40 == 0) || (v == -1 && b&0x40 != 0) {
			return append(dst, b)
		}
		dst = append(dst, b|0x80)
	}
}

func section(dst []byte, id byte, body []byte) []byte {
	dst = append(dst, id)
	dst = uleb(dst, uint64(len(body)))
	return append(dst, body...)
}

func vecName(dst []byte, s string) []byte {
	dst = uleb(dst, uint64(len(s)))
	return append(dst, s...)
}

func assemble(funcs []wfunc, data []wdata) []byte {
	out := []byte{0, 'a', 's', 'm', 1, 0, 0, 0}
	var types, fns, exports, code []byte
	types = uleb(types, uint64(len(funcs)))
	fns = uleb(fns, uint64(len(funcs)))
	exports = uleb(exports, uint64(len(funcs)+1))
	code = uleb(code, uint64(len(funcs)))
	for i, f := range funcs {
		types = append(types, 0x60)
		types = uleb(types, uint64(len(f.params)))
		types = append(types, f.params...)
		types = uleb(types, uint64(len(f.results)))
		types = append(types, f.results...)
		fns = uleb(fns, uint64(i))
		exports = vecName(exports, f.name)
		exports = append(exports, 0x00)
		exports = uleb(exports, uint64(i))
		body := append([]byte{0}, f.body...) // no locals
		body = append(body, 0x0b)
		code = uleb(code, uint64(len(body)))
		code = append(code, body...)
	}
	exports = vecName(exports, "memory")
	exports = append(exports, 0x02, 0)
	var ds []byte
	ds = uleb(ds, uint64(len(data)))
	for _, d := range data {
		ds = append(ds, 0x00, 0x41)
		ds = sleb(ds, int64(d.off))
		ds = append(ds, 0x0b)
		ds = uleb(ds, uint64(len(d.data)))
		ds = append(ds, d.data...)
	}
	out = section(out, 1, types)
	out = section(out, 3, fns)
	out = section(out, 5, []byte{1, 0x00, 1}) // one memory, min 1 page
	out = section(out, 7, exports)
	out = section(out, 10, code)
	return section(out, 11, ds)
}

const (
	tI32 = 0x7f
	tI64 = 0x7e
)

func i32c(v int32) []byte { return sleb([]byte{0x41}, int64(v)) }
func i64c(v int64) []byte { return sleb([]byte{0x42}, v) }

// Fixed addresses in hostile modules.
const (
	addrInfo = 1024
	addrErr  = 2048
	addrResp = 3072
	addrBuf  = 8192
)

// hostile describes a module whose policy export does something bad.
type hostile struct {
	abiExport string // default sdk.ExportABI
	minor     int32
	info      []byte // default: one policy "evil"
	policy    []byte // body of minfer_policy_next
	resp      []byte // data at addrResp
}

func (h hostile) bytes() []byte {
	if h.abiExport == "" {
		h.abiExport = sdk.ExportABI
	}
	if h.info == nil {
		h.info = sdk.AppendInfo(nil, []sdk.Info{{Name: "evil", Version: "0", Roles: []sdk.Role{sdk.RolePolicy}}})
		binary.LittleEndian.PutUint16(h.info[6:], uint16(h.minor))
	}
	msg := []byte("evil says no")
	funcs := []wfunc{
		{h.abiExport, nil, []byte{tI32}, i32c(h.minor)},
		{sdk.ExportInfo, nil, []byte{tI64}, i64c(sdk.Pack(addrInfo, uint32(len(h.info))))},
		{sdk.ExportAlloc, []byte{tI32}, []byte{tI32}, i32c(addrBuf)},
		{sdk.ExportFree, []byte{tI32, tI32}, nil, nil},
		{sdk.ExportInit, []byte{tI32, tI32}, []byte{tI32}, i32c(0)},
		{sdk.ExportLastError, nil, []byte{tI64}, i64c(sdk.Pack(addrErr, uint32(len(msg))))},
		{sdk.ExportPolicyNext, []byte{tI32, tI32}, []byte{tI64}, h.policy},
	}
	return assemble(funcs, []wdata{{addrInfo, h.info}, {addrErr, msg}, {addrResp, h.resp}})
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
