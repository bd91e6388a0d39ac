//go:build cuda

package cuda_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/minfer/minfer/core/backend"
	cudabe "github.com/minfer/minfer/core/backend/cuda"
	"github.com/minfer/minfer/core/quant"
)

// layerShape is one weight of a transformer layer: rows × cols, and which input it reads
// (weights that read the same input in a row are merged into one launch by the backend,
// as the model's q/k/v and gate/up are).
type layerShape struct {
	rows, cols int
	in         int // 0: the normed hidden state (q, k, v; gate and up read their own), 1: attention out (o), 2: SwiGLU out (down)
}

// qwen7BLayer is one Qwen2.5-7B layer's matmuls in the model's order: q, k, v (3584 →
// 3584 + 2 × 512), o, gate, up (3584 → 2 × 18944), down (18944 → 3584).
var qwen7BLayer = []layerShape{{3584, 3584, 0}, {512, 3584, 0}, {512, 3584, 0}, {3584, 3584, 1}, {18944, 3584, 0}, {18944, 3584, 0}, {3584, 18944, 2}}

// BenchmarkMatMulLayer times one Qwen2.5-7B layer's seven matmuls of one weight type (q/k/v
// and gate/up merged as in the model), four layers rotated so that L2 cannot hold them,
// 8 layers per captured graph: µs per layer. This, not one 14336 × 4096 weight, is where
// the tier's per-nt choice between mat-vec and mmq (driver.Tier.MMQRows) comes from: the
// q/k/v launch has 288 weight tiles, the down projection 18944 columns. MINFER_LAYER_NT
// (comma-separated) replaces the default nt list; MINFER_LAYER_TYPES (q4_0,q8_0,…) the types.
func BenchmarkMatMulLayer(b *testing.B) {
	g := open(b)
	defer g.Close()
	rng := rand.New(rand.NewPCG(9, 11))
	nts := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 16, 24, 32, 48, 64}
	if s := os.Getenv("MINFER_LAYER_NT"); s != "" {
		nts = nts[:0]
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				b.Fatalf("MINFER_LAYER_NT: %q is not a row count", f)
			}
			nts = append(nts, n)
		}
	}
	types := []quant.Type{quant.Q4_0, quant.Q5_0, quant.Q8_0, quant.Q4_K, quant.Q6_K}
	if s := os.Getenv("MINFER_LAYER_TYPES"); s != "" {
		types = types[:0]
		for _, f := range strings.Split(s, ",") {
			t, err := quant.ParseType(strings.TrimSpace(f))
			if err != nil {
				b.Fatalf("MINFER_LAYER_TYPES: %v", err)
			}
			types = append(types, t)
		}
	}
	const layers = 4
	for _, typ := range types {
		ws := make([][]backend.Weight, layers)
		for l := range ws {
			for _, sh := range qwen7BLayer {
				ws[l] = append(ws[l], benchWeights(b, g, rng, typ, sh.rows, sh.cols, 1)[0])
			}
		}
		for _, nt := range nts {
			b.Run(fmt.Sprintf("%v/nt%d", typ, nt), func(b *testing.B) { timeLayers(b, g, rng, ws, nt) })
		}
		for _, l := range ws {
			freeAll(g, l)
		}
	}
}

// timeLayers replays a graph of 8 layers' matmuls (rotating through ws) over nt rows and
// reports µs per layer. Each layer of the graph has its own inputs, so that only its
// q/k/v and its gate/up merge (the model's other ops flush the held matmuls between
// them; here nothing else would stop layer 1's gate joining layer 0's gate/up launch).
func timeLayers(b *testing.B, g *cudabe.Backend, rng *rand.Rand, ws [][]backend.Weight, nt int) {
	const per = 8
	var in [per][4]backend.Buffer // q/k/v's x, o's, down's, gate/up's
	cols := [4]int{ws[0][0].Cols(), ws[0][3].Cols(), ws[0][6].Cols(), ws[0][4].Cols()}
	for i := range in {
		for k := range in[i] {
			in[i][k] = mustF32(b, g, normals(rng, nt*cols[k], 1))
		}
	}
	outs := make([]backend.Buffer, len(qwen7BLayer))
	for i, sh := range qwen7BLayer {
		outs[i], _ = g.NewF32(nt * sh.rows)
	}
	defer func() {
		for i := range in {
			for _, x := range in[i] {
				g.Free(x)
			}
		}
		for _, y := range outs {
			g.Free(y)
		}
	}()
	benchSeq++
	key := fmt.Sprintf("benchlayer/%v/%d/%d", ws[0][0].Type(), nt, benchSeq)
	rec := func() {
		for i := range per {
			for j, sh := range qwen7BLayer {
				k := sh.in
				if j == 4 || j == 5 {
					k = 3
				}
				g.MatMul(outs[j], ws[i%len(ws)][j], in[i][k], nt)
			}
		}
	}
	b.ReportMetric(timeReplays(b, g, key, rec)/per*1e6, "us/layer")
}
