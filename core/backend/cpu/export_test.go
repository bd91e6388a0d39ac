package cpu

// SetSerialWork changes the serial-work threshold for a test (0 parallelises every op)
// and returns a function restoring it.
func SetSerialWork(n int) (restore func()) {
	old := serialWork
	serialWork = n
	return func() { serialWork = old }
}
