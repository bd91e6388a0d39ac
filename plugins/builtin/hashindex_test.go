package builtin

import (
	"math/rand/v2"
	"testing"
)

// TestHashIndex: the flat index agrees with a map through growth, with the zero key
// and colliding keys.
func TestHashIndex(t *testing.T) {
	var h hashIndex
	want := map[uint64]int32{}
	g := rand.New(rand.NewPCG(7, 8))
	keys := []uint64{0, 1, 1 << 63, ^uint64(0)}
	for range 5000 {
		keys = append(keys, g.Uint64N(3000)<<40) // many share their low bits
	}
	for i, k := range keys {
		h.set(k, int32(i))
		want[k] = int32(i)
	}
	if n := h.n + map[bool]int{true: 1}[h.hasZero]; n != len(want) {
		t.Fatalf("%d keys, want %d", n, len(want))
	}
	for k, v := range want {
		if got, ok := h.get(k); !ok || got != v {
			t.Fatalf("key %#x: got %d %v, want %d", k, got, ok, v)
		}
	}
	if _, ok := h.get(12345); ok {
		t.Fatal("absent key found")
	}
}
