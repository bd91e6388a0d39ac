package synth

import (
	"fmt"
	"io"

	"github.com/minfer/minfer/internal/inspect"
)

// WriteTable writes the plan as a table (synth --dry-run): name, type, shape, bytes, then totals.
func (p *Plan) WriteTable(w io.Writer) {
	o := p.Opts
	fmt.Fprintf(w, "%s %s: n_embd %d, %d layers, %d/%d heads of %d, n_ff %d, n_vocab %d, ctx %d, tied %v, type %s\n",
		o.Arch, o.Name, o.NEmbd, o.NLayer, o.NHead, o.NHeadKV, o.HeadDim, o.NFF, o.NVocab, o.Ctx, o.Tied, o.Type)
	nameW := 0
	for _, t := range p.Tensors {
		nameW = max(nameW, len(t.Name))
	}
	var total uint64
	for _, t := range p.Tensors {
		size := t.Bytes()
		total += size
		fmt.Fprintf(w, "  %-*s  %-5s  %-16s  %12d\n", nameW, t.Name, t.Type, inspect.ShapeString(t.Dims), size)
	}
	fmt.Fprintf(w, "%d tensors, %s params, %s of tensor data, %d metadata keys\n",
		len(p.Tensors), inspect.HumanCount(p.Params()), inspect.HumanBytes(total), len(p.KVs))
}
