package quant

import (
	"encoding/binary"
	"fmt"
	"os"
)

// miniGGUF is the smallest GGUF tensor-table reader the quant tests need to compare
// llama-quantize's bytes with ours; the real reader lives in core/gguf, which imports
// this package.
type miniGGUF struct {
	data    []byte
	tensors map[string]miniTensor
}

type miniTensor struct {
	typ  Type
	dims []uint64
	data []byte
}

func readMiniGGUF(path string) (*miniGGUF, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := &miniReader{b: b}
	if string(r.next(4)) != "GGUF" {
		return nil, fmt.Errorf("%s: bad magic", path)
	}
	r.u32()
	nt, nkv := r.u64(), r.u64()
	align := uint64(32)
	for i := uint64(0); i < nkv; i++ {
		key := r.str()
		typ := r.u32()
		if key == "general.alignment" && typ == 4 {
			align = uint64(r.u32())
			continue
		}
		r.skipValue(typ)
	}
	type info struct {
		name string
		t    miniTensor
		off  uint64
	}
	var infos []info
	for i := uint64(0); i < nt; i++ {
		var in info
		in.name = r.str()
		nd := r.u32()
		for j := uint32(0); j < nd; j++ {
			in.t.dims = append(in.t.dims, r.u64())
		}
		in.t.typ = Type(r.u32())
		in.off = r.u64()
		infos = append(infos, in)
	}
	base := (uint64(r.pos) + align - 1) / align * align
	g := &miniGGUF{data: b, tensors: map[string]miniTensor{}}
	for _, in := range infos {
		n := uint64(1)
		for _, d := range in.t.dims {
			n *= d
		}
		size, err := in.t.typ.RowBytes(int(n))
		if err != nil {
			return nil, err
		}
		in.t.data = b[base+in.off : base+in.off+uint64(size)]
		g.tensors[in.name] = in.t
	}
	return g, nil
}

type miniReader struct {
	b   []byte
	pos int
}

func (r *miniReader) next(n int) []byte { s := r.b[r.pos : r.pos+n]; r.pos += n; return s }
func (r *miniReader) u32() uint32       { return binary.LittleEndian.Uint32(r.next(4)) }
func (r *miniReader) u64() uint64       { return binary.LittleEndian.Uint64(r.next(8)) }
func (r *miniReader) str() string       { return string(r.next(int(r.u64()))) }

func (r *miniReader) skipValue(typ uint32) {
	sizes := map[uint32]int{0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
	switch typ {
	case 8:
		r.str()
	case 9:
		et, n := r.u32(), r.u64()
		for i := uint64(0); i < n; i++ {
			r.skipValue(et)
		}
	default:
		r.next(sizes[typ])
	}
}
