//go:build !linux

package cpu

// reserveKV returns n zeroed bytes for an arena (on the Go heap: the system commits
// pages as they are written where it does so for fresh allocations).
func reserveKV(n int) ([]byte, error) { return make([]byte, n), nil }

func releaseKV([]byte) {}
