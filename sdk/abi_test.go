package sdk

import (
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestPolicyRoundTrip(t *testing.T) {
	for _, o := range []RoundOutcome{
		{Round: -1},
		{Round: 7, Depth: 4, Drafted: 3, Accepted: 2, DraftConf: []float32{0.9, 0.5, 0.25}, DraftNs: 1234, VerifyNs: 99999, MaxDepth: 8},
	} {
		var got RoundOutcome
		if err := DecodePolicyRequest(AppendPolicyRequest(nil, &o), &got); err != nil {
			t.Fatal(err)
		}
		if len(o.DraftConf) == 0 {
			got.DraftConf = nil
		}
		if !reflect.DeepEqual(got, o) {
			t.Fatalf("got %+v, want %+v", got, o)
		}
	}
	d := DepthDecision{Depth: 5, MinConf: 0.3}
	got, err := DecodePolicyResponse(AppendPolicyResponse(nil, d))
	if err != nil || got != d {
		t.Fatalf("got %+v %v, want %+v", got, err, d)
	}
}

func TestPolicyResponseRejects(t *testing.T) {
	for name, d := range map[string]DepthDecision{
		"negative depth": {Depth: -1},
		"huge depth":     {Depth: MaxDepthLimit + 1},
		"nan conf":       {MinConf: float32(math.NaN())},
		"conf above 1":   {MinConf: 1.5},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := DecodePolicyResponse(AppendPolicyResponse(nil, d)); !errors.Is(err, ErrMalformed) {
				t.Fatalf("got %v, want ErrMalformed", err)
			}
		})
	}
}

func TestPenaltyRoundTrip(t *testing.T) {
	rows := []PenaltyRow{
		{History: []int32{1, 2, 1}, IDs: []int32{1, 2}, Logits: []float32{3, -1}},
		{History: []int32{1, 2, 1, 7}, IDs: []int32{1, 2, 7}, Logits: []float32{3, -1, 0.5}},
	}
	got, err := DecodePenaltyRequest(AppendPenaltyRequest(nil, rows), nil)
	if err != nil || !reflect.DeepEqual(got, rows) {
		t.Fatalf("got %+v %v, want %+v", got, err, rows)
	}
	got[1].Logits[2] = -5
	resp := AppendPenaltyResponse(nil, got)
	if err := DecodePenaltyResponse(resp, rows); err != nil || rows[1].Logits[2] != -5 {
		t.Fatalf("got %v %v, want -5", rows[1].Logits, err)
	}
	// a response for fewer rows, or a NaN, is refused and leaves rows alone
	if err := DecodePenaltyResponse(AppendPenaltyResponse(nil, rows[:1]), rows); !errors.Is(err, ErrMalformed) {
		t.Fatalf("short response: got %v, want ErrMalformed", err)
	}
	bad := []PenaltyRow{{Logits: []float32{1, 2}}, {Logits: []float32{9, 9, float32(math.NaN())}}}
	if err := DecodePenaltyResponse(AppendPenaltyResponse(nil, bad), rows); !errors.Is(err, ErrMalformed) || rows[0].Logits[0] != 3 {
		t.Fatalf("NaN response: got %v (row 0 %v), want ErrMalformed and rows unchanged", err, rows[0].Logits)
	}
}

func TestSampleRoundTrip(t *testing.T) {
	r := SampleRound{
		Draft: []int32{4, 9},
		Rows: []SampleRow{
			{IDs: []int32{4, 1}, Logits: []float32{2, 1}, DraftLogit: 2, MaxLogit: 2, LogSumExp: 2.3},
			{IDs: []int32{3}, Logits: []float32{5}, DraftLogit: -1, MaxLogit: 5, LogSumExp: 5.1},
			{IDs: []int32{8, 2}, Logits: []float32{1, 0}, MaxLogit: 1, LogSumExp: 1.4},
		},
		Seed: 42, Step: 17,
	}
	var got SampleRound
	if err := DecodeSampleRequest(AppendSampleRequest(nil, &r), &got); err != nil || !reflect.DeepEqual(got, r) {
		t.Fatalf("got %+v %v, want %+v", got, err, r)
	}
	for _, tc := range []struct {
		res SampleResult
		ok  bool
	}{
		{SampleResult{Accepted: 1, Next: 3}, true},
		{SampleResult{Accepted: 2, Next: 2}, true},
		{SampleResult{Accepted: 3, Next: 2}, false},  // more than drafted
		{SampleResult{Accepted: -1, Next: 4}, false}, // negative
		{SampleResult{Accepted: 0, Next: 77}, false}, // not a candidate
	} {
		_, err := DecodeSampleResponse(AppendSampleResponse(nil, tc.res), &r)
		if (err == nil) != tc.ok {
			t.Errorf("%+v: got err %v, want ok=%v", tc.res, err, tc.ok)
		}
	}
}

func TestInfoRoundTrip(t *testing.T) {
	in := []Info{
		{Name: "adaptive", Version: "1.0.0", Roles: []Role{RolePolicy}},
		{Name: "greedy", Version: "1.0.0", Roles: []Role{RoleSampler}, Needs: Needs{TopK: 1}},
	}
	m, err := ParseInfo(AppendInfo(nil, in))
	if err != nil {
		t.Fatal(err)
	}
	if m.ABIMajor != ABIMajor || m.ABIMinor != ABIMinor || len(m.Plugins) != 2 || m.Plugins[1].Needs.TopK != 1 || m.Plugins[0].Name != "adaptive" {
		t.Fatalf("got %+v", m)
	}
	for name, bad := range map[string][]Info{
		"no plugins": {},
		"bad name":   {{Name: "Bad Name", Roles: []Role{RolePolicy}}},
		"no roles":   {{Name: "x"}},
		"duplicate":  {{Name: "x", Roles: []Role{RolePolicy}}, {Name: "x", Roles: []Role{RolePolicy}}},
	} {
		if _, err := ParseInfo(AppendInfo(nil, bad)); err == nil {
			t.Errorf("%s: got nil error", name)
		}
	}
}

// TestTruncated decodes every prefix of valid messages: each must fail cleanly.
func TestTruncated(t *testing.T) {
	o := RoundOutcome{Round: 1, Drafted: 2, DraftConf: []float32{1, 2}}
	r := SampleRound{Draft: []int32{1}, Rows: []SampleRow{{IDs: []int32{1}, Logits: []float32{1}}, {IDs: []int32{2}, Logits: []float32{2}}}}
	rows := []PenaltyRow{{History: []int32{1}, IDs: []int32{1}, Logits: []float32{1}}}
	msgs := map[string][]byte{
		"policy":  AppendPolicyRequest(nil, &o),
		"sample":  AppendSampleRequest(nil, &r),
		"penalty": AppendPenaltyRequest(nil, rows),
		"info":    AppendInfo(nil, []Info{{Name: "x", Roles: []Role{RolePolicy}}}),
		"init":    AppendInitRequest(nil, "x", []byte("{}")),
	}
	for name, b := range msgs {
		for n := 0; n < len(b); n++ {
			if err := decodeAny(name, b[:n]); err == nil {
				t.Errorf("%s truncated to %d of %d bytes: got nil error", name, n, len(b))
			}
		}
		if err := decodeAny(name, b); err != nil {
			t.Errorf("%s whole: %v", name, err)
		}
	}
}

func decodeAny(kind string, b []byte) error {
	switch kind {
	case "policy":
		var o RoundOutcome
		return DecodePolicyRequest(b, &o)
	case "sample":
		var r SampleRound
		return DecodeSampleRequest(b, &r)
	case "penalty":
		_, err := DecodePenaltyRequest(b, nil)
		return err
	case "info":
		_, err := ParseInfo(b)
		return err
	case "init":
		_, _, err := DecodeInitRequest(b)
		return err
	}
	return nil
}

func FuzzDecode(f *testing.F) {
	o := RoundOutcome{Round: 1, Drafted: 1, DraftConf: []float32{1}}
	f.Add(AppendPolicyRequest(nil, &o))
	f.Add(AppendSampleRequest(nil, &SampleRound{Rows: []SampleRow{{IDs: []int32{1}, Logits: []float32{1}}}}))
	f.Add(AppendPenaltyRequest(nil, []PenaltyRow{{History: []int32{1}, IDs: []int32{1}, Logits: []float32{1}}}))
	f.Add(AppendInfo(nil, []Info{{Name: "x", Roles: []Role{RolePolicy}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, k := range []string{"policy", "sample", "penalty", "info", "init"} {
			_ = decodeAny(k, b)
		}
		r := SampleRound{Draft: []int32{1}, Rows: make([]SampleRow, 2)}
		_, _ = DecodeSampleResponse(b, &r)
		_, _ = DecodePolicyResponse(b)
		_ = DecodePenaltyResponse(b, []PenaltyRow{{Logits: make([]float32, 3)}})
	})
}

func TestDraftRoundTrip(t *testing.T) {
	q := DraftRequest{Appended: []int32{3, 1, 4, 1, 5}, MaxDepth: 3, Vocab: 10}
	var gotQ DraftRequest
	if err := DecodeDraftRequest(AppendDraftRequest(nil, &q), &gotQ); err != nil || !reflect.DeepEqual(gotQ, q) {
		t.Fatalf("request: got %+v %v, want %+v", gotQ, err, q)
	}
	res := DraftResult{Tokens: []int32{9, 2}, Conf: []float32{0.5, 1}}
	var got DraftResult
	if err := DecodeDraftResponse(AppendDraftResponse(nil, res), &q, &got); err != nil || !reflect.DeepEqual(got, res) {
		t.Fatalf("response: got %+v %v, want %+v", got, err, res)
	}
	for name, bad := range map[string]DraftResult{
		"too many":      {Tokens: []int32{1, 2, 3, 4}, Conf: []float32{1, 1, 1, 1}},
		"outside vocab": {Tokens: []int32{10}, Conf: []float32{1}},
		"nan":           {Tokens: []int32{1}, Conf: []float32{float32(math.NaN())}},
		"above 1":       {Tokens: []int32{1}, Conf: []float32{2}},
	} {
		if err := DecodeDraftResponse(AppendDraftResponse(nil, bad), &q, &got); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: got %v, want ErrMalformed", name, err)
		}
	}
}

// A v1.2 policy request carries the drafter fields; a v1.1 one (hdr 44) reads as 0.
func TestPolicyDrafterFields(t *testing.T) {
	o := RoundOutcome{Round: 3, Depth: 2, Drafted: 2, Accepted: 1, DraftConf: []float32{1, 0.5}, VerifyNs: 9, MaxDepth: 4, Drafter: 2, Drafters: 3}
	b := AppendPolicyRequest(nil, &o)
	var got RoundOutcome
	if err := DecodePolicyRequest(b, &got); err != nil || !reflect.DeepEqual(got, o) {
		t.Fatalf("got %+v %v, want %+v", got, err, o)
	}
	old := append(append([]byte(nil), b[:policyReqHdrV1]...), b[policyReqHdr:]...)
	old[0] = policyReqHdrV1
	if err := DecodePolicyRequest(old, &got); err != nil || got.Drafter != 0 || got.Drafters != 0 || got.Accepted != 1 || len(got.DraftConf) != 2 {
		t.Fatalf("v1.1 request: got %+v %v", got, err)
	}
	d := DepthDecision{Depth: 3, Drafter: 2}
	if gotD, err := DecodePolicyResponse(AppendPolicyResponse(nil, d)); err != nil || gotD != d {
		t.Fatalf("response: got %+v %v, want %+v", gotD, err, d)
	}
}

// TestHeaderErrorsSayWhatIsWrong: a response whose header is too short, below its
// message's minimum or beyond the message gets an error saying which, with the minimum.
func TestHeaderErrorsSayWhatIsWrong(t *testing.T) {
	le := func(words ...uint32) []byte {
		var b []byte
		for _, w := range words {
			b = le32(b, w)
		}
		return b
	}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"8-byte policy response", func() error { _, err := DecodePolicyResponse(le(8, 2)); return err }(), "policy response: malformed message: hdr 8, below the minimum 12 (hdr, depth, min_conf)"},
		{"hdr beyond the message", func() error { _, err := DecodePolicyResponse(le(16, 2, 0)); return err }(), "hdr 16, but the message has 12 bytes"},
		{"no hdr word", func() error { _, err := DecodePolicyResponse([]byte{1, 0}); return err }(), "2 bytes, too short for its u32 hdr"},
		{"sample response", func() error { _, err := DecodeSampleResponse(le(8, 0), &SampleRound{}); return err }(), "sample response: malformed message: hdr 8, below the minimum 12"},
		{"draft response", func() error { return DecodeDraftResponse(le(4), &DraftRequest{MaxDepth: 1}, &DraftResult{}) }(), "draft response: malformed message: hdr 4, below the minimum 8"},
		{"penalty row_hdr", func() error { return DecodePenaltyResponse(le(12, 0, 0), nil) }(), "row_hdr 0, below the minimum 4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !errors.Is(tc.err, ErrMalformed) || !strings.Contains(tc.err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", tc.err, tc.want)
			}
		})
	}
}

// A v1.3 policy request carries the verify forward's batch; a v1.2 one (hdr 52) reads
// them as 0 and keeps its drafter fields.
func TestPolicyBatchFields(t *testing.T) {
	o := RoundOutcome{Round: 3, Depth: 2, Drafted: 2, Accepted: 1, DraftConf: []float32{1, 0.5}, VerifyNs: 9, MaxDepth: 4,
		Drafter: 1, Drafters: 2, BatchSeqs: 5, BatchRows: 17}
	b := AppendPolicyRequest(nil, &o)
	var got RoundOutcome
	if err := DecodePolicyRequest(b, &got); err != nil || !reflect.DeepEqual(got, o) {
		t.Fatalf("got %+v %v, want %+v", got, err, o)
	}
	old := append(append([]byte(nil), b[:policyReqHdrV2]...), b[policyReqHdr:]...)
	old[0] = policyReqHdrV2
	want := o
	want.BatchSeqs, want.BatchRows = 0, 0
	if err := DecodePolicyRequest(old, &got); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("v1.2 request: got %+v %v, want %+v", got, err, want)
	}
}

// TestInfoParams: a v1.3 entry declares the params its plugin reads (none is a
// declaration too); an entry of a v1.2 record (entry_hdr 16) declares nothing; bad
// declarations are malformed.
func TestInfoParams(t *testing.T) {
	in := []Info{
		{Name: "mine", Roles: []Role{RolePolicy}, Params: []string{"threshold", "draft_max"}, ParamsDeclared: true},
		{Name: "none", Roles: []Role{RoleSampler}, ParamsDeclared: true},
		{Name: "open", Roles: []Role{RolePenalty}},
	}
	m, err := ParseInfo(AppendInfo(nil, in))
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range m.Plugins {
		if !reflect.DeepEqual(p.Params, in[i].Params) || p.ParamsDeclared != in[i].ParamsDeclared {
			t.Errorf("plugin %s: got params %q declared %v, want %q %v", p.Name, p.Params, p.ParamsDeclared, in[i].Params, in[i].ParamsDeclared)
		}
	}
	// the same record as a v1.2 module writes it: entry_hdr 16, no flags, no params
	v2 := le32(nil, infoHdr)
	v2 = append(v2, 1, 0, 2, 0)
	v2 = le32(le32(v2, 1), infoEntryHdrV2)
	v2 = le32(le32(le32(le32(v2, RoleBitPolicy), 0), 4), 0)
	v2 = append(v2, "mine"...)
	if m, err := ParseInfo(v2); err != nil || m.Plugins[0].ParamsDeclared || m.Plugins[0].Params != nil {
		t.Fatalf("v1.2 record: got %+v %v, want no declaration", m, err)
	}
	for name, bad := range map[string]Info{
		"bad key":              {Name: "x", Roles: []Role{RolePolicy}, Params: []string{"Thres hold"}, ParamsDeclared: true},
		"repeated":             {Name: "x", Roles: []Role{RolePolicy}, Params: []string{"a", "a"}, ParamsDeclared: true},
		"empty":                {Name: "x", Roles: []Role{RolePolicy}, Params: []string{"a", ""}, ParamsDeclared: true},
		"undeclared with keys": {Name: "x", Roles: []Role{RolePolicy}, Params: []string{"a"}},
	} {
		if _, err := ParseInfo(AppendInfo(nil, []Info{bad})); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: got %v, want ErrMalformed", name, err)
		}
	}
}

// A v1.4 policy request carries the drafters' offers after the confidences; a v1.3 one
// (hdr 60) reads as none, and a v1.3 module reads a v1.4 request through its hdr (the
// offers past its confidences are not read); an offer count above MaxDrafters is
// malformed.
func TestPolicyOffers(t *testing.T) {
	o := RoundOutcome{Round: 3, Depth: 2, Drafted: 2, Accepted: 1, DraftConf: []float32{1, 0.5}, VerifyNs: 9, MaxDepth: 4,
		Drafter: 1, Drafters: 3, BatchSeqs: 1, BatchRows: 3, Offered: []int{-1, 0, 7}}
	b := AppendPolicyRequest(nil, &o)
	var got RoundOutcome
	if err := DecodePolicyRequest(b, &got); err != nil || !reflect.DeepEqual(got, o) {
		t.Fatalf("got %+v %v, want %+v", got, err, o)
	}
	// as a v1.3 host writes it: hdr 60, no offers
	old := append(append([]byte(nil), b[:policyReqHdrV3]...), b[policyReqHdr:policyReqHdr+8]...)
	old[0] = policyReqHdrV3
	want := o
	want.Offered = nil
	if err := DecodePolicyRequest(old, &got); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("v1.3 request: got %+v %v, want %+v", got, err, want)
	}
	// a v1.4 request without offers decodes as none
	o.Offered = nil
	if err := DecodePolicyRequest(AppendPolicyRequest(nil, &o), &got); err != nil || got.Offered != nil {
		t.Fatalf("no offers: got %+v %v", got, err)
	}
	// truncated offers, and too many
	o.Offered = []int{-1, 0, 7}
	b = AppendPolicyRequest(nil, &o)
	if err := DecodePolicyRequest(b[:len(b)-4], &got); !errors.Is(err, ErrMalformed) {
		t.Fatalf("truncated offers: got %v, want ErrMalformed", err)
	}
	binary.LittleEndian.PutUint32(b[60:], MaxDrafters+1)
	if err := DecodePolicyRequest(b, &got); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "offers") {
		t.Fatalf("%d offers: got %v, want ErrMalformed naming the offers", MaxDrafters+1, err)
	}
}
