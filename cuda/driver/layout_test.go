package driver

import (
	"testing"
	"unsafe"
)

// TestLaunchStructLayout pins the Go mirrors of CUlaunchConfig and CUlaunchAttribute to
// the C layout (x86-64 and arm64 LP64): the driver reads them by offset.
func TestLaunchStructLayout(t *testing.T) {
	var c launchConfig
	var a launchAttr
	for _, tc := range []struct {
		name      string
		got, want uintptr
	}{
		{"sizeof(CUlaunchConfig)", unsafe.Sizeof(c), 56},
		{"offsetof(sharedMemBytes)", unsafe.Offsetof(c.shared), 24},
		{"offsetof(hStream)", unsafe.Offsetof(c.stream), 32},
		{"offsetof(attrs)", unsafe.Offsetof(c.attrs), 40},
		{"offsetof(numAttrs)", unsafe.Offsetof(c.nattrs), 48},
		{"sizeof(CUlaunchAttribute)", unsafe.Sizeof(a), 72},
		{"offsetof(value)", unsafe.Offsetof(a.val), 8},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %d, want %d", tc.name, tc.got, tc.want)
		}
	}
}
