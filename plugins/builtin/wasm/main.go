// Command wasm is the WebAssembly module of the built-in plugins: built with
// GOOS=wasip1 GOARCH=wasm -buildmode=c-shared into ../builtin.wasm by
// `go generate ./plugins/builtin`. Natively it builds too (and does nothing), so the
// usual tools check it.
package main

import (
	"github.com/minfer/minfer/plugins/builtin"
	"github.com/minfer/minfer/sdk/guest"
)

func init() {
	for _, p := range builtin.Plugins {
		switch {
		case p.NewPolicy != nil:
			guest.RegisterPolicy(p.Info.Name, p.Info.Version, p.NewPolicy)
		case p.NewPenalty != nil:
			guest.RegisterPenalty(p.Info.Name, p.Info.Version, p.NewPenalty)
		case p.NewSampler != nil:
			guest.RegisterSampler(p.Info.Name, p.Info.Version, p.Info.Needs, p.NewSampler)
		case p.NewDrafter != nil:
			guest.RegisterDrafter(p.Info.Name, p.Info.Version, p.NewDrafter)
		}
		guest.DeclareParams(p.Info.Name, p.Info.Params...)
	}
}

func main() {}
