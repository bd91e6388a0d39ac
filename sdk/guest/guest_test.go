package guest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/minfer/minfer/sdk"
)

type fixed struct{ d int }

func (f fixed) NextDepth(context.Context, sdk.RoundOutcome) (sdk.DepthDecision, error) {
	if f.d < 0 {
		panic("negative depth")
	}
	return sdk.DepthDecision{Depth: f.d}, nil
}

type failing struct{}

func (failing) Needs() sdk.Needs { return sdk.Needs{TopK: 3} }
func (failing) Sample(context.Context, *sdk.SampleRound) (sdk.SampleResult, error) {
	return sdk.SampleResult{}, errors.New("no luck")
}

func init() {
	RegisterPolicy("fixed", "1.2.3", func(p []byte) (sdk.DepthPolicy, error) {
		switch string(p) {
		case `{"panic":true}`:
			return fixed{-1}, nil
		case `{"bad":true}`:
			return nil, errors.New("bad params")
		}
		return fixed{5}, nil
	})
	RegisterSampler("failing", "0.1", sdk.Needs{TopK: 3}, func([]byte) (sdk.Sampler, error) { return failing{}, nil })
}

func TestHandler(t *testing.T) {
	var h Handler
	info, err := sdk.ParseInfo(h.Info())
	if err != nil || len(info.Plugins) != 2 || info.Plugins[0].Version != "1.2.3" || info.Plugins[1].Needs.TopK != 3 {
		t.Fatalf("info: got %+v %v", info, err)
	}
	req := sdk.AppendPolicyRequest(nil, &sdk.RoundOutcome{Round: -1})
	if _, err := h.PolicyNext(req); err == nil || !strings.Contains(err.Error(), "before a successful init") {
		t.Fatalf("before init: got %v", err)
	}
	for _, tc := range []struct{ name, params, want string }{
		{"nope", "{}", `no plugin "nope"`},
		{"fixed", `{"bad":true}`, "bad params"},
	} {
		if err := h.Init(sdk.AppendInitRequest(nil, tc.name, []byte(tc.params))); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("init %s %s: got %v, want %q", tc.name, tc.params, err, tc.want)
		}
	}
	if err := h.Init(sdk.AppendInitRequest(nil, "fixed", nil)); err != nil {
		t.Fatal(err)
	}
	resp, err := h.PolicyNext(req)
	if d, derr := sdk.DecodePolicyResponse(resp); err != nil || derr != nil || d.Depth != 5 {
		t.Fatalf("policy: got %+v %v %v", d, err, derr)
	}
	if _, err := h.Sample(sdk.AppendSampleRequest(nil, &sdk.SampleRound{Rows: make([]sdk.SampleRow, 1)})); err == nil || !strings.Contains(err.Error(), "not a sampler") {
		t.Fatalf("wrong role: got %v", err)
	}
	if _, err := h.PolicyNext([]byte{1, 2}); !errors.Is(err, sdk.ErrMalformed) {
		t.Fatalf("garbage request: got %v", err)
	}
	// a panic in plugin code is an error, not a crash
	if err := h.Init(sdk.AppendInitRequest(nil, "fixed", []byte(`{"panic":true}`))); err != nil {
		t.Fatal(err)
	}
	if _, err := h.PolicyNext(req); err == nil || !strings.Contains(err.Error(), "panic: negative depth") {
		t.Fatalf("panic: got %v", err)
	}
	// a plugin's own error comes back as is
	if err := h.Init(sdk.AppendInitRequest(nil, "failing", nil)); err != nil {
		t.Fatal(err)
	}
	if k, _ := h.SamplerNeeds(); k != 3 {
		t.Fatalf("needs: got %d, want 3", k)
	}
	r := sdk.SampleRound{Rows: []sdk.SampleRow{{IDs: []int32{1}, Logits: []float32{0}}}}
	if _, err := h.Sample(sdk.AppendSampleRequest(nil, &r)); err == nil || err.Error() != "no luck" {
		t.Fatalf("sampler error: got %v", err)
	}
}
