package cpu

import (
	"fmt"

	"github.com/minfer/minfer/core/backend"
)

// maxKVBytes bounds one cache (both K and V) so a corrupt context length fails clearly
// instead of exhausting memory.
const maxKVBytes = 1 << 40

// KV is one sequence's key/value cache. Each (layer, kv head, position) holds one head
// vector of HeadDim values, F16 or Q8_0 blocks, laid out [layer][kv head][pos] so that
// attention reads a head's keys contiguously.
type KV struct {
	spec     backend.KVSpec
	vecBytes int      // bytes of one head vector
	k, v     []byte   // Q8_0 storage
	k16, v16 []uint16 // F16 storage
	freed    bool
}

var _ backend.KV = (*KV)(nil)

// Spec is the shape the cache was made with.
func (kv *KV) Spec() backend.KVSpec { return kv.spec }

// Bytes is the memory of K and V together.
func (kv *KV) Bytes() int64 {
	s := kv.spec
	return 2 * int64(s.Layers) * int64(s.KVHeads) * int64(s.Ctx) * int64(kv.vecBytes)
}

// vec is the index of the head vector (layer, head, pos) in vector units.
func (kv *KV) vec(layer, head, pos int) int {
	return (layer*kv.spec.KVHeads+head)*kv.spec.Ctx + pos
}

// NewKV allocates a zeroed cache. It fails for non-positive sizes, an unknown type, a
// HeadDim that is odd or (for Q8_0) not a multiple of 32, or a size over 1 TiB.
func (b *Backend) NewKV(spec backend.KVSpec) (backend.KV, error) {
	if b.closed {
		return nil, errClosed
	}
	if spec.Layers < 1 || spec.KVHeads < 1 || spec.HeadDim < 1 || spec.Ctx < 1 {
		return nil, fmt.Errorf("cpu: KV cache %+v: layers, kv heads, head dim and context must be ≥ 1", spec)
	}
	if spec.HeadDim%2 != 0 {
		return nil, fmt.Errorf("cpu: KV cache: head dim %d is odd", spec.HeadDim)
	}
	kv := &KV{spec: spec}
	switch spec.Type {
	case backend.KVF16:
		kv.vecBytes = 2 * spec.HeadDim
	case backend.KVQ8_0:
		if spec.HeadDim%32 != 0 {
			return nil, fmt.Errorf("cpu: KV cache: q8_0 needs a head dim that is a multiple of 32, got %d", spec.HeadDim)
		}
		kv.vecBytes = spec.HeadDim / 32 * q8_0Bytes
	default:
		return nil, fmt.Errorf("cpu: KV cache: unknown element type %d", int(spec.Type))
	}
	vecs := int64(spec.Layers) * int64(spec.KVHeads) * int64(spec.Ctx)
	if vecs > maxKVBytes/2/int64(kv.vecBytes) {
		return nil, fmt.Errorf("cpu: KV cache %+v: %d layers × %d heads × %d positions is too large", spec, spec.Layers, spec.KVHeads, spec.Ctx)
	}
	n := int(vecs)
	if spec.Type == backend.KVF16 {
		kv.k16 = make([]uint16, n*spec.HeadDim)
		kv.v16 = make([]uint16, n*spec.HeadDim)
	} else {
		kv.k = make([]byte, n*kv.vecBytes)
		kv.v = make([]byte, n*kv.vecBytes)
	}
	return kv, nil
}

func kvOf(x backend.KV, what string) *KV {
	kv, ok := x.(*KV)
	if !ok {
		panic(fmt.Sprintf("BUG: cpu: %s: %T is not a cpu KV cache", what, x))
	}
	if kv.freed {
		panic(fmt.Sprintf("BUG: cpu: %s: KV cache used after Free", what))
	}
	return kv
}

// checkAttn validates the op's attention shape against the cache; errors are data
// errors (model metadata), recorded rather than panicking.
func checkAttn(kv *KV, layer int, a backend.Attn) error {
	s := kv.spec
	switch {
	case layer < 0 || layer >= s.Layers:
		return fmt.Errorf("layer %d outside [0, %d)", layer, s.Layers)
	case a.HeadDim != s.HeadDim:
		return fmt.Errorf("head dim %d, cache has %d", a.HeadDim, s.HeadDim)
	case a.KVHeads != s.KVHeads:
		return fmt.Errorf("%d kv heads, cache has %d", a.KVHeads, s.KVHeads)
	case a.Heads < 1 || a.Heads%a.KVHeads != 0:
		return fmt.Errorf("%d heads is not a multiple of %d kv heads", a.Heads, a.KVHeads)
	}
	return nil
}
