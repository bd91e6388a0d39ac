// Package watpolicy is a minfer depth policy written in WebAssembly text (policy.wat),
// by hand from sdk/ABI.md, with no Go and no language runtime: it shows the ABI from
// the side of an author who does not write Go. Its test builds it with wat2wasm (Debian
// package wabt), runs the conformance kit on it and decodes with it through a
// minfer.toml.
package watpolicy
