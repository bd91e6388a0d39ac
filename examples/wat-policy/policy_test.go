package watpolicy

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/minfer/minfer/examples/internal/extest"
	"github.com/minfer/minfer/plugins/check"
	"github.com/minfer/minfer/plugins/wasm"
	"github.com/minfer/minfer/sdk"
)

// build compiles policy.wat with wat2wasm, or skips the test where wabt is absent.
func build(t *testing.T) string {
	t.Helper()
	tool, err := exec.LookPath("wat2wasm")
	if err != nil {
		t.Skip("wat2wasm not found: install wabt (apt-get install wabt) to build the WebAssembly-text policy")
	}
	out := filepath.Join(t.TempDir(), "wat-policy.wasm")
	if b, err := exec.Command(tool, "policy.wat", "-o", out).CombinedOutput(); err != nil {
		t.Fatalf("wat2wasm: %v\n%s", err, b)
	}
	return out
}

// TestConformance runs minfer plugin check's kit on the module.
func TestConformance(t *testing.T) {
	bin, err := os.ReadFile(build(t))
	if err != nil {
		t.Fatal(err)
	}
	infos, results, err := check.Check(context.Background(), bin, check.CheckOptions{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].Name != "wat-policy" || infos[0].ABIMinor != 1 {
		t.Fatalf("module declares %+v, want one plugin wat-policy of ABI v1.1", infos)
	}
	for _, r := range results {
		if r.Err != nil {
			t.Errorf("%s (%s) %s: %v", r.Plugin, r.Role, r.Name, r.Err)
		}
	}
}

// TestThroughConfig declares the module in a minfer.toml as the depth policy and
// decodes with it, the model drafting for itself (every draft token is accepted): the
// policy starts at 2 and climbs one depth per round to draft_max, and the output
// equals plain decoding (greedy identity). With [spec] min_conf set, rounds end early
// although the policy answers no cut-off of its own: the host applies the floor.
func TestThroughConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a WebAssembly module and runs the engine")
	}
	wasm := build(t)
	conf := func(minConf float64) string {
		return fmt.Sprintf(`
[spec]
policy = "wat-policy"
draft_max = 6
min_conf = %g
[sampling]
temperature = 0
[plugins.wat-policy]
source = "file:%s"
`, minConf, wasm)
	}
	opts := extest.Options{Prompt: "Once upon a time", Tokens: 40, Draft: true}
	res := extest.Generate(t, extest.Config(t, conf(0)), opts)
	by := res.Spec.ByDepth
	for d := 2; d <= 6; d++ {
		if by[fmt.Sprint(d)].Rounds == 0 {
			t.Errorf("no round drafted %d tokens; rounds by depth %v", d, by)
		}
	}
	if by["1"].Rounds != 0 || by["6"].Rounds < 2 || res.Spec.Policy != "wat-policy" {
		t.Errorf("want depths 2, 3, 4, 5 then 6 under policy wat-policy, got %v (policy %q)", by, res.Spec.Policy)
	}
	if res.Spec.Accepted != res.Spec.Drafted {
		t.Errorf("self-drafting: accepted %d of %d", res.Spec.Accepted, res.Spec.Drafted)
	}
	plain := extest.Generate(t, extest.Config(t, conf(0)), extest.Options{Prompt: opts.Prompt, Tokens: opts.Tokens})
	if !slices.Equal(res.Tokens, plain.Tokens) {
		t.Errorf("greedy identity: speculative %v, plain %v", res.Tokens, plain.Tokens)
	}
	floored := extest.Generate(t, extest.Config(t, conf(0.99)), opts)
	if floored.Spec.Drafted >= res.Spec.Drafted || !slices.Equal(floored.Tokens, plain.Tokens) {
		t.Errorf("[spec] min_conf 0.99: drafted %d (without it %d), want fewer (rounds ending early) and the same tokens", floored.Spec.Drafted, res.Spec.Drafted)
	}
}

// TestOldLayoutSeesNoBatch: the module speaks ABI v1.1, whose policy request is 44
// bytes of header; this host writes v1.3's 60 (with the verify forward's batch). The
// module reads what it knows through hdr and answers exactly as to an outcome without
// batch fields: a module of an older minor keeps working unchanged.
func TestOldLayoutSeesNoBatch(t *testing.T) {
	bin, err := os.ReadFile(build(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	m, err := wasm.Load(ctx, bin, wasm.Options{Name: "wat-policy", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	depths := func(batch bool) []int {
		p, err := m.Policy(ctx, "wat-policy", []byte("{}"), wasm.CallOptions{Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		var got []int
		last := sdk.RoundOutcome{Round: -1, MaxDepth: 6}
		for r := range 8 {
			d, err := p.NextDepth(ctx, last)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, d.Depth)
			last = sdk.RoundOutcome{Round: r, Depth: d.Depth, Drafted: d.Depth, Accepted: d.Depth - r%2,
				DraftConf: make([]float32, d.Depth), VerifyNs: 1e6, MaxDepth: 6}
			if batch {
				last.BatchSeqs, last.BatchRows = 4, 4*(d.Depth+1)
			}
		}
		return got
	}
	if plain, batched := depths(false), depths(true); !slices.Equal(plain, batched) {
		t.Errorf("depths with batch fields %v, without %v: want the same", batched, plain)
	}
}
