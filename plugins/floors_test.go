package plugins

import (
	"context"
	"testing"

	"github.com/minfer/minfer/sdk"
)

type fixedPolicy sdk.DepthDecision

func (p fixedPolicy) NextDepth(context.Context, sdk.RoundOutcome) (sdk.DepthDecision, error) {
	return sdk.DepthDecision(p), nil
}

func TestFloors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		floors Floors
		in     sdk.DepthDecision
		want   sdk.DepthDecision
	}{
		{"none", Floors{}, sdk.DepthDecision{Depth: 2, MinConf: 0.3}, sdk.DepthDecision{Depth: 2, MinConf: 0.3}},
		{"min_conf raises a policy's 0", Floors{MinConf: 0.9}, sdk.DepthDecision{Depth: 4}, sdk.DepthDecision{Depth: 4, MinConf: 0.9}},
		{"min_conf keeps a higher cut-off", Floors{MinConf: 0.5}, sdk.DepthDecision{Depth: 4, MinConf: 0.7}, sdk.DepthDecision{Depth: 4, MinConf: 0.7}},
		{"keep_cut", Floors{MinConf: 0.5, KeepCut: true}, sdk.DepthDecision{Depth: 4}, sdk.DepthDecision{Depth: 4, MinConf: 0.5, KeepCut: true}},
		{"draft_min raises a drafting round", Floors{DraftMin: 3}, sdk.DepthDecision{Depth: 1}, sdk.DepthDecision{Depth: 3}},
		{"draft_min leaves plain decoding", Floors{DraftMin: 3}, sdk.DepthDecision{Depth: 0}, sdk.DepthDecision{Depth: 0}},
		{"draft_min leaves a deeper round", Floors{DraftMin: 3}, sdk.DepthDecision{Depth: 5}, sdk.DepthDecision{Depth: 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := WithFloors(fixedPolicy(tc.in), tc.floors)
			got, err := p.NextDepth(context.Background(), sdk.RoundOutcome{Round: -1, MaxDepth: 8})
			if err != nil || got != tc.want {
				t.Fatalf("got %+v %v, want %+v", got, err, tc.want)
			}
		})
	}
	p := fixedPolicy{}
	if WithFloors(p, Floors{}) != sdk.DepthPolicy(p) {
		t.Error("zero floors: want the policy itself")
	}
}
