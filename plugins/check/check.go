// Package check is the plugin conformance kit behind `minfer plugin check`: it loads a
// WebAssembly module and runs each of its plugins through self-test rounds, hostile
// inputs, recorded traces (policies), the greedy identity (samplers) and greedy rounds
// over a copy-heavy sequence (drafters).
package check

import (
	"bytes"
	"cmp"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"path"
	"slices"
	"sort"
	"time"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/config"
	"github.com/minfer/minfer/plugins"
	"github.com/minfer/minfer/plugins/replay"
	"github.com/minfer/minfer/plugins/wasm"
	"github.com/minfer/minfer/sdk"
)

// Simulator traces: the adaptive policy's rounds on simulated decoders, recorded and
// kept current by plugins/builtin's TestSimTraces (not "golden": in minfer that word
// names llama.cpp's reference outputs). The conformance kit replays every policy
// through them.
//
//go:embed simtraces/*.jsonl
var simTraces embed.FS

// SimTraces returns the embedded traces by file name.
func SimTraces() (map[string][]sdk.TraceRound, error) {
	out := map[string][]sdk.TraceRound{}
	entries, err := simTraces.ReadDir("simtraces")
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		b, err := simTraces.ReadFile(path.Join("simtraces", e.Name()))
		if err != nil {
			return nil, err
		}
		rounds, err := sdk.ReadTrace(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("simulator trace %s: %w", e.Name(), err)
		}
		out[e.Name()] = rounds
	}
	return out, nil
}

// CheckOptions configures Check.
type CheckOptions struct {
	Plugin   string        // check only this plugin of the module ("" = all)
	Name     string        // names the module in its load errors, as the file the user gave ("" = "module")
	Params   []byte        // JSON params for init ("{}" when nil)
	Timeout  time.Duration // per call (0: Deadline's default, the host's)
	MemoryMB int           // memory cap (0: config.DefaultMemoryMB, the host's)
	Log      io.Writer     // guest output
	CacheDir string        // compilation cache (see wasm.Options)
}

// Deadline is the per-call deadline the checks run under: Timeout, else
// config.DefaultWasmTimeout, the one minfer run, serve and specbench give a builtin: or
// file: plugin whose [plugins.NAME] table sets none — so that a plugin passes its check
// under the deadline it will meet (the calls made once per instance or sequence get
// max(deadline, 1 s) in both: plugins/wasm).
func (o CheckOptions) Deadline() time.Duration {
	if o.Timeout > 0 {
		return o.Timeout
	}
	return config.DefaultWasmTimeout
}

// Memory is the memory cap in MiB the checks run under: MemoryMB, else the host's
// config.DefaultMemoryMB.
func (o CheckOptions) Memory() int {
	if o.MemoryMB > 0 {
		return o.MemoryMB
	}
	return config.DefaultMemoryMB
}

// CheckResult is the outcome of one conformance check.
type CheckResult struct {
	Plugin string
	Role   sdk.Role
	Name   string
	Err    error  // nil = passed
	Note   string // measurements or warnings
}

// Check is the conformance kit behind `minfer plugin check`: it loads the module
// (validating exports, ABI version and info record), then, for each plugin and role,
// starts it with opts.Params and runs a self-test round, edge-case ("hostile") inputs
// that a correct plugin must answer validly, the simulator traces (policies), for
// samplers determinism and the greedy identity check, and for drafters greedy rounds
// over a copy-heavy sequence and determinism. The error is non-nil only when the
// module cannot be loaded at all.
func Check(ctx context.Context, bin []byte, opts CheckOptions) ([]sdk.Info, []CheckResult, error) {
	m, err := wasm.Load(ctx, bin, wasm.Options{Name: cmp.Or(opts.Name, "module"), Timeout: opts.Deadline(), MemoryMB: opts.Memory(),
		Instances: 1, Log: opts.Log, CacheDir: opts.CacheDir})
	if err != nil {
		return nil, nil, err
	}
	defer m.Close(ctx)
	params := opts.Params
	if len(params) == 0 {
		params = []byte("{}")
	}
	infos := m.Plugins()
	if opts.Plugin != "" {
		info, ok := m.Lookup(opts.Plugin)
		if !ok {
			return infos, nil, fmt.Errorf("module has no plugin %q", opts.Plugin)
		}
		infos = []sdk.Info{info}
	}
	var keys map[string]json.RawMessage // nil when params is not an object: init says so
	_ = json.Unmarshal(params, &keys)
	var out []CheckResult
	for _, info := range infos {
		// as the host refuses a [plugins.NAME] params key the plugin does not declare
		if err := plugins.CheckParamKeys(info, slices.Collect(maps.Keys(keys))); err != nil {
			out = append(out, CheckResult{Plugin: info.Name, Role: info.Roles[0], Name: "declared params", Err: err})
		}
		for _, role := range info.Roles {
			c := checker{ctx: ctx, m: m, name: info.Name, role: role, params: params}
			switch role {
			case sdk.RolePolicy:
				c.policy()
			case sdk.RoleSampler:
				c.sampler()
			case sdk.RolePenalty:
				c.penalty()
			case sdk.RoleDrafter:
				c.drafter()
			}
			out = append(out, c.results...)
		}
	}
	return m.Plugins(), out, nil
}

type checker struct {
	ctx     context.Context
	m       *wasm.Module
	name    string
	role    sdk.Role
	params  []byte
	results []CheckResult
}

func (c *checker) add(name string, err error, note string) {
	c.results = append(c.results, CheckResult{Plugin: c.name, Role: c.role, Name: name, Err: err, Note: note})
}

// edgeOutcomes are valid but unusual round outcomes a policy must answer.
func edgeOutcomes() []sdk.RoundOutcome {
	nan := float32(math.NaN())
	big := make([]float32, sdk.MaxDepthLimit)
	for i := range big {
		big[i] = 1
	}
	return []sdk.RoundOutcome{
		{Round: -1},
		{Round: 0, MaxDepth: 0, VerifyNs: 1},
		{Round: 1, Depth: 4, Drafted: 0, Accepted: 0, VerifyNs: 1, MaxDepth: 4},
		{Round: 2, Depth: 3, Drafted: 3, Accepted: 0, DraftConf: []float32{0, nan, 1}, DraftNs: 0, VerifyNs: 1, MaxDepth: 3},
		{Round: 3, Depth: sdk.MaxDepthLimit, Drafted: sdk.MaxDepthLimit, Accepted: sdk.MaxDepthLimit, DraftConf: big,
			DraftNs: 1 << 40, VerifyNs: 1 << 40, MaxDepth: sdk.MaxDepthLimit},
		{Round: 1 << 30, Depth: 1, Drafted: 1, Accepted: 1, DraftConf: []float32{1}, DraftNs: 1, VerifyNs: math.MaxInt64 / 4, MaxDepth: 1},
	}
}

func (c *checker) policy() {
	open := func() (*wasm.Policy, error) { return c.m.Policy(c.ctx, c.name, c.params, wasm.CallOptions{}) }
	newPolicy := func() (sdk.DepthPolicy, error) { return open() }
	p, err := open()
	c.add("init", err, "")
	if err != nil {
		return
	}
	d, err := p.NextDepth(c.ctx, sdk.RoundOutcome{Round: -1, MaxDepth: 8})
	c.add("first round", err, fmt.Sprintf("depth %d, min_conf %.2f", d.Depth, d.MinConf))
	p.Close()

	p, err = open()
	if err == nil {
		var over int
		for _, o := range edgeOutcomes() {
			var dec sdk.DepthDecision
			if dec, err = p.NextDepth(c.ctx, o); err != nil {
				break
			}
			if o.Round >= 0 && dec.Depth > o.MaxDepth {
				over++
			}
		}
		note := ""
		if over > 0 && err == nil {
			// legal (ABI.md: the engine clamps them); said because a policy that tracks
			// its own depth may mean to stay within the bound
			note = fmt.Sprintf("%d answers above max_depth, which the engine clamps to it", over)
		}
		c.add("edge-case outcomes", err, note)
		p.Close()
	} else {
		c.add("edge-case outcomes", err, "")
	}

	c.severalDrafters(open)

	traces, err := SimTraces()
	if err != nil {
		c.add("simulator traces", err, "")
		return
	}
	names := make([]string, 0, len(traces))
	for n := range traces {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		res, err := replay.Replay(c.ctx, traces[n], newPolicy, 1)
		note := ""
		if err == nil {
			note = fmt.Sprintf("%.0f tok/s (mean depth %.2f) vs recorded %.0f tok/s (mean depth %.2f)",
				res.Replayed.Rate(), res.Replayed.MeanDepth(), res.Recorded.Rate(), res.Recorded.MeanDepth())
		}
		c.add("simulator trace "+n, err, note)
	}
}

// drafterOutcomes are the rounds of a sequence that offers three drafters (the draft
// model and two drafter plugins), with the drafters' offers (ABI v1.4): the first
// offers nothing, the second a copied passage; then a round of each drafter.
func drafterOutcomes() []sdk.RoundOutcome {
	offers := [][]int{{-1, 0, 16}, {-1, 3, 0}, {-1, -1, 16}}
	out := []sdk.RoundOutcome{{Round: -1, MaxDepth: 8, Drafters: 3, Offered: offers[0]}}
	for r := range 12 {
		k := r % 3
		draftNs := int64(1000) // a drafter plugin's call; the draft model's steps cost 41 µs
		if k == 0 {
			draftNs += 40000
		}
		out = append(out, sdk.RoundOutcome{Round: r, Depth: 2, Drafted: 2, Accepted: r % 3, DraftConf: []float32{0.9, 0.6},
			DraftNs: draftNs, VerifyNs: 200000, MaxDepth: 8, Drafter: k, Drafters: 3,
			BatchSeqs: 1, BatchRows: 3, Offered: offers[r%3]})
	}
	return out
}

// severalDrafters feeds a policy the rounds of a sequence of several drafters with
// their offers: a decision that drafts must name one of the drafters the sequence
// offers (the engine fails the request otherwise).
func (c *checker) severalDrafters(open func() (*wasm.Policy, error)) {
	p, err := open()
	if err != nil {
		c.add("several drafters", err, "")
		return
	}
	defer p.Close()
	used, rounds := map[int]bool{}, drafterOutcomes()
	for _, o := range rounds {
		d, err := p.NextDepth(c.ctx, o)
		if err != nil {
			c.add("several drafters", err, "")
			return
		}
		if d.Depth > 0 && (d.Drafter < 0 || d.Drafter >= o.Drafters) {
			c.add("several drafters", fmt.Errorf("round %d: drafter %d chosen, the sequence offers %d (the engine fails the request)", o.Round+1, d.Drafter, o.Drafters), "")
			return
		}
		if d.Depth > 0 {
			used[d.Drafter] = true
		}
	}
	c.add("several drafters", nil, fmt.Sprintf("%d of 3 drafters chosen in %d rounds", len(used), len(rounds)))
}

// sampleRound builds a round of nt rows with k candidates each (k = 0: full rows over
// a vocabulary of 512), best first, drafting each row's argmax unless mismatch says so.
func sampleRound(g *rand.Rand, k, nt int, gap float32, mismatchAt int) *sdk.SampleRound {
	full := k == 0
	if full {
		k = 512
	}
	r := &sdk.SampleRound{Seed: g.Uint64(), Step: g.Uint64N(1 << 20)}
	for i := 0; i < nt; i++ {
		var row sdk.SampleRow
		perm := g.Perm(4096)
		for j := 0; j < k; j++ {
			id := int32(perm[j])
			if full {
				id = int32(j)
			}
			row.IDs = append(row.IDs, id)
			row.Logits = append(row.Logits, float32(g.NormFloat64()))
		}
		best := 0
		if full {
			best = g.IntN(k)
		}
		row.Logits[best] += gap + 5
		if !full {
			for j := 1; j < k; j++ { // keep best first
				if row.Logits[j] > row.Logits[0] {
					row.Logits[j] = row.Logits[0] - 1
				}
			}
			sortCandidates(&row)
		}
		row.MaxLogit = row.Logits[best]
		_, lse := backend.MaxLSE(row.Logits)
		row.LogSumExp = float32(lse)
		r.Rows = append(r.Rows, row)
		if i < nt-1 {
			draft := row.IDs[best]
			if i == mismatchAt {
				draft = row.IDs[(best+1)%k]
			}
			r.Draft = append(r.Draft, draft)
		}
	}
	for i, d := range r.Draft {
		for j, id := range r.Rows[i].IDs {
			if id == d {
				r.Rows[i].DraftLogit = r.Rows[i].Logits[j]
			}
		}
	}
	return r
}

// sortCandidates puts a row's candidates in the engine's order (sdk.RanksBefore).
func sortCandidates(row *sdk.SampleRow) {
	idx := make([]int, len(row.IDs))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool {
		x, y := idx[a], idx[b]
		return sdk.RanksBefore(row.Logits[x], row.IDs[x], row.Logits[y], row.IDs[y])
	})
	ids, ls := make([]int32, len(idx)), make([]float32, len(idx))
	for i, j := range idx {
		ids[i], ls[i] = row.IDs[j], row.Logits[j]
	}
	row.IDs, row.Logits = ids, ls
}

// argmaxOf is the reference greedy choice of a row: its first candidate in the engine's
// order.
func argmaxOf(row *sdk.SampleRow) int32 {
	best := 0
	for j := range row.IDs {
		if sdk.RanksBefore(row.Logits[j], row.IDs[j], row.Logits[best], row.IDs[best]) {
			best = j
		}
	}
	return row.IDs[best]
}

func (c *checker) sampler() {
	s, err := c.m.Sampler(c.ctx, c.name, c.params, wasm.CallOptions{})
	c.add("init", err, "")
	if err != nil {
		return
	}
	defer s.Close()
	k := s.Needs().TopK
	c.add("needs", nil, fmt.Sprintf("top-k %d", k))
	g := rand.New(rand.NewPCG(1, 2))

	r := sampleRound(g, k, 5, 0, -1)
	a, err := s.Sample(c.ctx, r)
	if err == nil {
		var b sdk.SampleResult
		if b, err = s.Sample(c.ctx, r); err == nil && a != b {
			err = fmt.Errorf("the same round (seed, step) gave %+v, then %+v", a, b)
		}
	}
	c.add("self-test round and determinism", err, "")

	// greedy identity: with one overwhelming candidate per row, every sampler must
	// accept the draft up to its first mismatch and emit the row's argmax; a K=1
	// sampler must do so for any logits.
	gap := float32(1000)
	if k == 1 {
		gap = 0
	}
	err = nil
	for i := 0; i < 200 && err == nil; i++ {
		nt := 1 + g.IntN(9)
		mis := g.IntN(nt + 2) // ≥ nt-1: no mismatch
		r := sampleRound(g, k, nt, gap, mis)
		want := sdk.SampleResult{Accepted: len(r.Draft)}
		for j, d := range r.Draft {
			if d != argmaxOf(&r.Rows[j]) {
				want.Accepted = j
				break
			}
		}
		want.Next = argmaxOf(&r.Rows[want.Accepted])
		var got sdk.SampleResult
		if got, err = s.Sample(c.ctx, r); err == nil && got != want {
			err = fmt.Errorf("round %d: got %+v, want %+v (greedy identity)", i, got, want)
		}
	}
	c.add("greedy identity", err, "")

	err = nil
	for i, r := range edgeRounds(g, k) {
		if _, err = s.Sample(c.ctx, r); err != nil {
			err = fmt.Errorf("edge round %d: %w", i, err)
			break
		}
	}
	c.add("edge-case rounds", err, "")
}

// edgeRounds are valid but unusual sample rounds: one candidate, -Inf and huge logits,
// draft tokens that are no candidate, deep rounds.
func edgeRounds(g *rand.Rand, k int) []*sdk.SampleRound {
	one := sampleRound(g, k, 1, 0, -1)
	inf := sampleRound(g, k, 3, 0, -1)
	for i := range inf.Rows {
		for j := 1; j < len(inf.Rows[i].Logits); j++ {
			inf.Rows[i].Logits[j] = float32(math.Inf(-1))
		}
	}
	huge := sampleRound(g, k, 2, 1e30, -1)
	stranger := sampleRound(g, k, 4, 0, -1)
	for i := range stranger.Draft {
		stranger.Draft[i] = 1 << 30
	}
	deep := sampleRound(g, k, 33, 0, -1)
	return []*sdk.SampleRound{one, inf, huge, stranger, deep}
}

func (c *checker) penalty() {
	p, err := c.m.Penalty(c.ctx, c.name, c.params, wasm.CallOptions{})
	c.add("init", err, "")
	if err != nil {
		return
	}
	defer p.Close()
	w := p.Window()
	c.add("window", nil, fmt.Sprintf("%d tokens", w))
	g := rand.New(rand.NewPCG(3, 4))
	rows := penaltyRows(g, 8, 64)
	err = p.Apply(c.ctx, rows)
	c.add("self-test round", err, "")

	empty := []sdk.PenaltyRow{{}, {}}
	err = p.Apply(c.ctx, empty)
	c.add("empty windows", err, "")

	edge := penaltyRows(g, 2, 4096)
	for i := range edge[0].Logits {
		edge[0].Logits[i] = float32(math.Inf(-1))
	}
	same := sdk.PenaltyRow{History: make([]int32, 300), IDs: []int32{0}, Logits: []float32{1e30}}
	err = p.Apply(c.ctx, append(edge, same))
	c.add("edge-case rows", err, "")
}

func penaltyRows(g *rand.Rand, n, hist int) []sdk.PenaltyRow {
	rows := make([]sdk.PenaltyRow, n)
	for i := range rows {
		seen := map[int32]bool{}
		for j := 0; j < hist; j++ {
			t := int32(g.IntN(hist/2 + 1))
			rows[i].History = append(rows[i].History, t)
			if !seen[t] {
				seen[t] = true
				rows[i].IDs = append(rows[i].IDs, t)
				rows[i].Logits = append(rows[i].Logits, float32(g.NormFloat64()*3))
			}
		}
	}
	return rows
}
