// Command testplugin is the process plugin the tests of plugins/process build: it serves
// all three roles, and its params make it misbehave on purpose.
//
// params: {"mode": "ok"|"crash"|"hang"|"panic"|"fail"|"garbage", "top_k": N, "window": N,
// "factor": F}
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/minfer/minfer/sdk"
	"github.com/minfer/minfer/sdk/process"
)

type params struct {
	Mode   string  `json:"mode"`
	TopK   int     `json:"top_k"`
	Window int     `json:"window"`
	Factor float32 `json:"factor"`
}

func parse(b []byte) (params, error) {
	p := params{Mode: "ok", TopK: 1, Window: 64, Factor: 2}
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("params: %w", err)
	}
	if p.Mode == "badparams" {
		return p, errors.New("params: mode badparams refused")
	}
	return p, nil
}

// misbehave acts out the mode; it returns only for "ok" and "garbage".
func misbehave(ctx context.Context, mode string) error {
	switch mode {
	case "crash":
		fmt.Fprintln(os.Stderr, "testplugin: crashing on purpose")
		os.Exit(3)
	case "hang":
		time.Sleep(time.Hour) // ignores ctx on purpose
	case "panic":
		panic("testplugin: panic on purpose")
	case "fail":
		return errors.New("testplugin: failing on purpose")
	}
	// The host's deadline must arrive with every call.
	if _, ok := ctx.Deadline(); !ok {
		return errors.New("testplugin: call without a deadline")
	}
	return ctx.Err()
}

// policy answers depth = accepted + 1 and min_conf 0.25; garbage: min_conf 7.
type policy struct {
	p     params
	calls int
}

func (q *policy) NextDepth(ctx context.Context, last sdk.RoundOutcome) (sdk.DepthDecision, error) {
	q.calls++
	fmt.Fprintf(os.Stderr, "testplugin: NextDepth after round %d\n", last.Round)
	if err := misbehave(ctx, q.p.Mode); err != nil {
		return sdk.DepthDecision{}, err
	}
	if q.p.Mode == "garbage" {
		return sdk.DepthDecision{Depth: 1, MinConf: 7}, nil
	}
	// Depth also counts calls, so a test sees that instances keep their own state.
	return sdk.DepthDecision{Depth: last.Accepted + q.calls, MinConf: 0.25}, nil
}

// sampler is greedy over the candidates: accept while the draft token is the row's best.
type sampler struct{ p params }

func (s *sampler) Needs() sdk.Needs { return sdk.Needs{TopK: s.p.TopK} }

func (s *sampler) Sample(ctx context.Context, r *sdk.SampleRound) (sdk.SampleResult, error) {
	if err := misbehave(ctx, s.p.Mode); err != nil {
		return sdk.SampleResult{}, err
	}
	if s.p.Mode == "garbage" {
		return sdk.SampleResult{Accepted: len(r.Draft) + 5}, nil
	}
	n := 0
	for n < len(r.Draft) && r.Rows[n].IDs[0] == r.Draft[n] {
		n++
	}
	return sdk.SampleResult{Accepted: n, Next: r.Rows[n].IDs[0]}, nil
}

// penalty divides the logits of seen tokens by factor.
type penalty struct{ p params }

func (q *penalty) Window() int { return q.p.Window }

func (q *penalty) Apply(ctx context.Context, rows []sdk.PenaltyRow) error {
	if err := misbehave(ctx, q.p.Mode); err != nil {
		return err
	}
	for i := range rows {
		for j := range rows[i].Logits {
			rows[i].Logits[j] /= q.p.Factor
		}
		if q.p.Mode == "garbage" {
			rows[i].Logits = rows[i].Logits[:0]
		}
	}
	return nil
}

// drafter proposes the last token it was told, repeated (up to max_depth, at most 3),
// keeping the sequence itself; garbage: an id outside the vocabulary.
type drafter struct {
	p   params
	seq []int32
}

func (d *drafter) Draft(ctx context.Context, q *sdk.DraftRequest) (sdk.DraftResult, error) {
	if err := misbehave(ctx, d.p.Mode); err != nil {
		return sdk.DraftResult{}, err
	}
	d.seq = append(d.seq, q.Appended...)
	if d.p.Mode == "garbage" {
		return sdk.DraftResult{Tokens: []int32{int32(q.Vocab)}, Conf: []float32{1}}, nil
	}
	var res sdk.DraftResult
	for range min(q.MaxDepth, 3) {
		res.Tokens, res.Conf = append(res.Tokens, d.seq[len(d.seq)-1]), append(res.Conf, 0.5)
	}
	return res, nil
}

func main() {
	process.Serve(process.Plugins{
		Name:    "testplugin",
		Version: "0.1.0",
		Policy: func(b []byte) (sdk.DepthPolicy, error) {
			p, err := parse(b)
			return &policy{p: p}, err
		},
		Sampler: func(b []byte) (sdk.Sampler, error) {
			p, err := parse(b)
			return &sampler{p: p}, err
		},
		Penalty: func(b []byte) (sdk.Penalty, error) {
			p, err := parse(b)
			return &penalty{p: p}, err
		},
		Drafter: func(b []byte) (sdk.Drafter, error) {
			p, err := parse(b)
			return &drafter{p: p}, err
		},
	})
}
