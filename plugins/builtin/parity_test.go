package builtin_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/minfer/minfer/plugins/builtin"
	"github.com/minfer/minfer/plugins/wasm"
	"github.com/minfer/minfer/sdk"
)

// The built-ins compiled to WebAssembly must decide exactly as the same Go code called
// natively: on the recorded trace for the policies, and on seeded random rounds (K=64
// candidates, up to 8 rows) for the samplers and the penalty.

func loadWasm(t testing.TB) *wasm.Module {
	t.Helper()
	m, err := wasm.Load(context.Background(), builtin.WASM, wasm.Options{Name: "builtin", SHA256: builtin.SHA256(), Instances: 1, Timeout: 5 * time.Second, Trusted: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return m
}

func readTrace(t *testing.T) []sdk.TraceRound {
	f, err := os.Open(filepath.Join("..", "check", "simtraces", "shifting.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rounds, err := sdk.ReadTrace(f)
	if err != nil {
		t.Fatal(err)
	}
	return rounds
}

func TestPolicyParity(t *testing.T) {
	ctx := context.Background()
	m := loadWasm(t)
	rounds := readTrace(t)
	for _, tc := range []struct {
		name, params string
		drafters     int // the trace's rounds told as of a sequence with this many drafters
	}{
		{"adaptive", `{"draft_max":12}`, 0},
		{"adaptive", `{"draft_max":8,"hysteresis":0,"optimism":2,"min_conf":0.2}`, 0},
		{"adaptive", `{"draft_max":12}`, 3},
		{"ucb", `{"draft_max":12}`, 0},
		{"static", `{"depth":5}`, 0},
	} {
		t.Run(fmt.Sprintf("%s%s/%d drafters", tc.name, tc.params, tc.drafters), func(t *testing.T) {
			p, _ := builtin.Lookup(tc.name)
			native, err := p.NewPolicy([]byte(tc.params))
			if err != nil {
				t.Fatal(err)
			}
			w, err := m.Policy(ctx, tc.name, []byte(tc.params), wasm.CallOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			last := sdk.RoundOutcome{Round: -1, MaxDepth: 12, Drafters: tc.drafters}
			for i, r := range rounds {
				a, err1 := native.NextDepth(ctx, last)
				b, err2 := w.NextDepth(ctx, last)
				if err1 != nil || err2 != nil || a != b {
					t.Fatalf("round %d: native %+v %v, wasm %+v %v", i, a, err1, b, err2)
				}
				last = r.Outcome()
				if tc.drafters > 0 {
					last.Drafter, last.Drafters = a.Drafter, tc.drafters
				}
			}
		})
	}
}

func randomRound(g *rand.Rand, k, nt int) *sdk.SampleRound {
	r := &sdk.SampleRound{Seed: g.Uint64(), Step: g.Uint64N(1000)}
	for i := 0; i < nt; i++ {
		row := sdk.SampleRow{}
		perm := g.Perm(1000)
		for j := 0; j < k; j++ {
			row.IDs = append(row.IDs, int32(perm[j]))
			row.Logits = append(row.Logits, float32(g.NormFloat64()*3))
		}
		sortRow(&row)
		r.Rows = append(r.Rows, row)
		if i < nt-1 {
			draft := row.IDs[0] // a greedy draft agrees with the target often...
			if g.IntN(3) == 0 {
				draft = row.IDs[g.IntN(k)] // ...but not always
			}
			r.Draft = append(r.Draft, draft)
		}
	}
	return r
}

// sortRow orders candidates best first, as the host delivers them.
func sortRow(row *sdk.SampleRow) {
	for i := 1; i < len(row.IDs); i++ {
		for j := i; j > 0 && row.Logits[j] > row.Logits[j-1]; j-- {
			row.IDs[j], row.IDs[j-1] = row.IDs[j-1], row.IDs[j]
			row.Logits[j], row.Logits[j-1] = row.Logits[j-1], row.Logits[j]
		}
	}
}

func TestSamplerParity(t *testing.T) {
	ctx := context.Background()
	m := loadWasm(t)
	for _, tc := range []struct{ name, params string }{
		{"greedy", `{}`},
		{"sampling", `{"top_k":64}`},
		{"sampling", `{"temperature":1.3,"top_k":64,"top_p":0.8,"min_p":0}`},
	} {
		t.Run(tc.name+tc.params, func(t *testing.T) {
			p, _ := builtin.Lookup(tc.name)
			native, err := p.NewSampler([]byte(tc.params))
			if err != nil {
				t.Fatal(err)
			}
			w, err := m.Sampler(ctx, tc.name, []byte(tc.params), wasm.CallOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			if native.Needs() != w.Needs() {
				t.Fatalf("needs: native %+v, wasm %+v", native.Needs(), w.Needs())
			}
			g := rand.New(rand.NewPCG(5, 5))
			for i := 0; i < 300; i++ {
				r := randomRound(g, 64, 1+g.IntN(8))
				a, err1 := native.Sample(ctx, r)
				b, err2 := w.Sample(ctx, r)
				if err1 != nil || err2 != nil || a != b {
					t.Fatalf("round %d: native %+v %v, wasm %+v %v", i, a, err1, b, err2)
				}
			}
		})
	}
}

func TestPenaltyParity(t *testing.T) {
	ctx := context.Background()
	m := loadWasm(t)
	params := []byte(`{"repeat_penalty":1.3,"repeat_last_n":16,"presence_penalty":0.2,"frequency_penalty":0.1}`)
	native, _ := builtin.NewPenalty(params)
	w, err := m.Penalty(ctx, "penalty", params, wasm.CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	g := rand.New(rand.NewPCG(9, 9))
	for i := 0; i < 200; i++ {
		var a, b []sdk.PenaltyRow
		for r := 0; r < 1+g.IntN(8); r++ {
			var row sdk.PenaltyRow
			seen := map[int32]bool{}
			for j := 0; j < 24; j++ {
				tok := int32(g.IntN(20))
				row.History = append(row.History, tok)
				if !seen[tok] {
					seen[tok] = true
					row.IDs = append(row.IDs, tok)
					row.Logits = append(row.Logits, float32(g.NormFloat64()*4))
				}
			}
			a = append(a, row)
			b = append(b, sdk.PenaltyRow{History: row.History, IDs: row.IDs, Logits: append([]float32(nil), row.Logits...)})
		}
		if err := native.Apply(ctx, a); err != nil {
			t.Fatal(err)
		}
		if err := w.Apply(ctx, b); err != nil {
			t.Fatal(err)
		}
		for r := range a {
			for j := range a[r].Logits {
				if a[r].Logits[j] != b[r].Logits[j] {
					t.Fatalf("call %d row %d: native %v, wasm %v", i, r, a[r].Logits, b[r].Logits)
				}
			}
		}
	}
}
