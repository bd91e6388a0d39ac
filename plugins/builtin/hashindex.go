package builtin

// hashIndex maps uint64 keys to int32 values: open addressing with linear probing in
// two flat slices, grown at half load. The drafters index every n-gram of a request
// with it: compiled to WebAssembly a Go map costs about a microsecond an operation,
// this a few tens of nanoseconds.
type hashIndex struct {
	keys []uint64 // 0 = empty: the key 0 lives in zero
	vals []int32
	n    int
	// zero is the value of key 0 when hasZero
	zero    int32
	hasZero bool
}

func (h *hashIndex) slot(k uint64) int {
	mask := len(h.keys) - 1
	i := int((k * 0x9e3779b97f4a7c15) >> 32 & uint64(mask))
	for h.keys[i] != 0 && h.keys[i] != k {
		i = (i + 1) & mask
	}
	return i
}

// get returns the value of k.
func (h *hashIndex) get(k uint64) (int32, bool) {
	if k == 0 {
		return h.zero, h.hasZero
	}
	if h.n == 0 {
		return 0, false
	}
	i := h.slot(k)
	return h.vals[i], h.keys[i] != 0
}

// set sets the value of k.
func (h *hashIndex) set(k uint64, v int32) {
	if k == 0 {
		h.zero, h.hasZero = v, true
		return
	}
	if 2*(h.n+1) > len(h.keys) {
		h.grow()
	}
	i := h.slot(k)
	if h.keys[i] == 0 {
		h.keys[i] = k
		h.n++
	}
	h.vals[i] = v
}

func (h *hashIndex) grow() {
	keys, vals := h.keys, h.vals
	size := max(64, 2*len(keys))
	h.keys, h.vals = make([]uint64, size), make([]int32, size)
	for i, k := range keys {
		if k != 0 {
			j := h.slot(k)
			h.keys[j], h.vals[j] = k, vals[i]
		}
	}
}

// bytes is the memory the index holds.
func (h *hashIndex) bytes() int { return cap(h.keys)*8 + cap(h.vals)*4 }
