// Package wasmtest assembles tiny WebAssembly modules for tests: plugins that speak
// ABI v1 with fixed function bodies (a trap, an endless loop, a bad answer), which no
// Go toolchain would produce.
package wasmtest

import (
	"encoding/binary"

	"github.com/minfer/minfer/sdk"
)

// Value types.
const (
	I32 = 0x7f
	I64 = 0x7e
)

// Func is one exported function.
type Func struct {
	Name            string
	Params, Results []byte // value types
	Body            []byte // instructions, without the final end
}

// Data is one active data segment.
type Data struct {
	Off   uint32
	Bytes []byte
}

// Assemble builds a module with one page of memory (exported as "memory"), funcs
// exported under their names, and data.
func Assemble(funcs []Func, data []Data) []byte {
	out := []byte{0, 'a', 's', 'm', 1, 0, 0, 0}
	var types, fns, exports, code []byte
	types = uleb(types, uint64(len(funcs)))
	fns = uleb(fns, uint64(len(funcs)))
	exports = uleb(exports, uint64(len(funcs)+1))
	code = uleb(code, uint64(len(funcs)))
	for i, f := range funcs {
		types = append(types, 0x60)
		types = uleb(types, uint64(len(f.Params)))
		types = append(types, f.Params...)
		types = uleb(types, uint64(len(f.Results)))
		types = append(types, f.Results...)
		fns = uleb(fns, uint64(i))
		exports = vecName(exports, f.Name)
		exports = append(exports, 0x00)
		exports = uleb(exports, uint64(i))
		body := append([]byte{0}, f.Body...) // no locals
		body = append(body, 0x0b)
		code = uleb(code, uint64(len(body)))
		code = append(code, body...)
	}
	exports = vecName(exports, "memory")
	exports = append(exports, 0x02, 0)
	var ds []byte
	ds = uleb(ds, uint64(len(data)))
	for _, d := range data {
		ds = append(ds, 0x00)
		ds = append(ds, I32Const(int32(d.Off))...)
		ds = append(ds, 0x0b)
		ds = uleb(ds, uint64(len(d.Bytes)))
		ds = append(ds, d.Bytes...)
	}
	out = section(out, 1, types)
	out = section(out, 3, fns)
	out = section(out, 5, []byte{1, 0x00, 1}) // one memory, min 1 page
	out = section(out, 7, exports)
	out = section(out, 10, code)
	return section(out, 11, ds)
}

// I32Const and I64Const are the instructions that push v.
func I32Const(v int32) []byte { return sleb([]byte{0x41}, int64(v)) }
func I64Const(v int64) []byte { return sleb([]byte{0x42}, v) }

// Fixed addresses of a Plugin's data.
const (
	AddrInfo = 1024
	AddrErr  = 2048
	AddrResp = 3072
	AddrBuf  = 8192
)

// Plugin describes an ABI v1 module with one policy: fixed answers for the ABI
// exports and Policy as the body of minfer_policy_next.
type Plugin struct {
	ABIExport string // default sdk.ExportABI
	Minor     int32  // what the ABI export returns
	Info      []byte // the info record, at AddrInfo
	Err       []byte // the last error message, at AddrErr
	Policy    []byte // body of minfer_policy_next
	Draft     []byte // body of minfer_draft (nil: not exported)
	Resp      []byte // data at AddrResp
	Extra     []Func // further exports
}

// Bytes assembles the module.
func (p Plugin) Bytes() []byte {
	if p.ABIExport == "" {
		p.ABIExport = sdk.ExportABI
	}
	funcs := []Func{
		{p.ABIExport, nil, []byte{I32}, I32Const(p.Minor)},
		{sdk.ExportInfo, nil, []byte{I64}, I64Const(sdk.Pack(AddrInfo, uint32(len(p.Info))))},
		{sdk.ExportAlloc, []byte{I32}, []byte{I32}, I32Const(AddrBuf)},
		{sdk.ExportFree, []byte{I32, I32}, nil, nil},
		{sdk.ExportInit, []byte{I32, I32}, []byte{I32}, I32Const(0)},
		{sdk.ExportLastError, nil, []byte{I64}, I64Const(sdk.Pack(AddrErr, uint32(len(p.Err))))},
		{sdk.ExportPolicyNext, []byte{I32, I32}, []byte{I64}, p.Policy},
	}
	if p.Draft != nil {
		funcs = append(funcs, Func{sdk.ExportDraft, []byte{I32, I32}, []byte{I64}, p.Draft})
	}
	funcs = append(funcs, p.Extra...)
	return Assemble(funcs, []Data{{AddrInfo, p.Info}, {AddrErr, p.Err}, {AddrResp, p.Resp}})
}

// PolicyInfo is the info record of one policy plugin named name, claiming ABI minor
// version minor.
func PolicyInfo(name, version string, minor int32) []byte {
	info := sdk.AppendInfo(nil, []sdk.Info{{Name: name, Version: version, Roles: []sdk.Role{sdk.RolePolicy}}})
	binary.LittleEndian.PutUint16(info[6:], uint16(minor))
	return info
}

// DrafterInfo is the info record of one drafter plugin named name (ABI v1.2).
func DrafterInfo(name, version string) []byte {
	return sdk.AppendInfo(nil, []sdk.Info{{Name: name, Version: version, Roles: []sdk.Role{sdk.RoleDrafter}}})
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
