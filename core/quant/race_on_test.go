//go:build race

package quant

// raceEnabled: the race detector makes sync.Pool drop items at random, so scratch
// reuse (and the zero-allocation tests) cannot be checked under it.
const raceEnabled = true
