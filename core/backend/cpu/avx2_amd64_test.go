package cpu

import "testing"

// forceAVX2 makes the float dispatchers take the AVX2 kernels for the rest of the test,
// as on a CPU without AVX-512 (skipped where the CPU lacks AVX2, FMA or F16C).
func forceAVX2(t *testing.T) {
	t.Helper()
	if !hasAVX2 {
		t.Skip("no AVX2+FMA+F16C on this CPU")
	}
	old512, old2 := useAVX512, useAVX2
	useAVX512, useAVX2 = false, true
	t.Cleanup(func() { useAVX512, useAVX2 = old512, old2 })
}

// TestAVX2MatchesGo: the AVX2 float kernels give the Go definitions' bits (and so the
// AVX-512 kernels', TestAVX512MatchesGo).
func TestAVX2MatchesGo(t *testing.T) {
	forceAVX2(t)
	floatKernelsMatchGo(t, "AVX2")
}

// TestAttendF16ZMatchesLoopAVX2: attention in passes with the AVX2 kernels gives ggml's
// one-key-at-a-time loop's bits.
func TestAttendF16ZMatchesLoopAVX2(t *testing.T) {
	forceAVX2(t)
	attendF16ZMatchesLoop(t)
}

// TestRoPENeoXAVX2MatchesGo: the AVX2 neox rotation gives ropeHead's bits.
func TestRoPENeoXAVX2MatchesGo(t *testing.T) {
	forceAVX2(t)
	ropeNeoXMatchesGo(t, ropeNeoXAVX2)
}

// TestSwiGLUAVX2MatchesGo: the AVX2 silu gives the Go emulation's bits (and so the
// AVX-512 kernel's), exp overflow and underflow included.
func TestSwiGLUAVX2MatchesGo(t *testing.T) {
	forceAVX2(t)
	swigluMatchesGo(t, "AVX2", swigluAVX2)
}
