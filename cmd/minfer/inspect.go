package main

import (
	"context"

	"github.com/minfer/minfer/core/gguf"
	"github.com/minfer/minfer/internal/inspect"
)

func init() {
	register(&command{
		name:    "inspect",
		summary: "show a GGUF file's metadata, tensors and file type; dump a tensor's values",
		run:     runInspect,
	})
}

const inspectUsage = `
Usage: minfer inspect MODEL.gguf [--json] [--tensor NAME [--dequant]]

Prints the GGUF version, architecture, file type (general.file_type as llama.cpp names
it, e.g. Q4_K_M), every metadata key (arrays longer than --items are summarised: type,
count, first items), the tensor table (name, type, shape in ggml order with the row
length first, bytes) and totals (parameters, bytes, tensors per type).

With --tensor NAME it describes one tensor; adding --dequant prints its values
dequantized to float32 (with --json: {"name","type","shape","values"}; NaN and
infinities are written as null).

Examples:
  minfer inspect model.gguf
  minfer inspect model.gguf --json | jq '.metadata[] | .key'
  minfer inspect model.gguf --tensor blk.0.attn_q.weight
  minfer inspect model.gguf --tensor output_norm.weight --dequant --json
`

func runInspect(ctx context.Context, m *Main, args []string) error {
	var o inspect.Options
	fs := m.newFlagSet("inspect", inspectUsage)
	fs.BoolVar(&o.JSON, "json", false, "print JSON instead of text")
	fs.StringVar(&o.Tensor, "tensor", "", "describe only the tensor `NAME`")
	fs.BoolVar(&o.Dequant, "dequant", false, "with --tensor: print the dequantized values")
	fs.IntVar(&o.Items, "items", 8, "show at most `N` items of a metadata array")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("inspect: want one MODEL.gguf argument, got %d", len(pos))
	}
	if o.Dequant && o.Tensor == "" {
		return usagef("inspect: --dequant needs --tensor NAME")
	}
	if o.Items < 0 {
		return usagef("inspect: --items must be ≥ 0")
	}
	f, err := gguf.Open(pos[0])
	if err != nil {
		return err
	}
	defer f.Close()
	return inspect.Write(ctx, m.Stdout, pos[0], f, o)
}
