//go:build !unix

package wasm

import "github.com/tetratelabs/wazero/experimental"

func reserveMemory(uint64) experimental.LinearMemory { return nil }
