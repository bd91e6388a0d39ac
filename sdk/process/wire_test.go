package process

import (
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/minfer/minfer/sdk"
)

// samples holds one filled value of every message type.
func samples() []message {
	inf := float32(math.Inf(-1))
	return []message{
		&empty{},
		&infoResponse{Protocol: 1, Name: "step", Version: "1.2.3", Roles: []string{"policy", "sampler"}},
		&newRequest{Params: []byte(`{"a":1}`)},
		&newResponse{ID: 7, Window: 64, TopK: -1},
		&idRequest{ID: 1 << 40},
		&policyRequest{ID: 3, Last: sdk.RoundOutcome{Round: -1, Depth: 4, Drafted: 3, Accepted: 2,
			DraftConf: []float32{0.9, 0.5, 0.25}, DraftNs: 1e6, VerifyNs: 3e6, MaxDepth: 16}},
		&policyResponse{sdk.DepthDecision{Depth: 5, MinConf: 0.3, KeepCut: true}},
		&policyRequest{ID: 3, Last: sdk.RoundOutcome{Round: 2, Depth: 4, Drafted: 1, DraftConf: []float32{0.9},
			VerifyNs: 3e6, MaxDepth: 16, Drafter: 2, Drafters: 3}},
		&policyResponse{sdk.DepthDecision{Depth: 5, Drafter: 2}},
		&policyRequest{ID: 3, Minor: 1, Last: sdk.RoundOutcome{Round: 2, Depth: 4, Drafted: 1, DraftConf: []float32{0.9},
			VerifyNs: 3e6, MaxDepth: 16, Drafters: 1, BatchSeqs: 4, BatchRows: 11}},
		&policyRequest{ID: 3, Minor: 2, Last: sdk.RoundOutcome{Round: 2, Depth: 4, Drafted: 1, DraftConf: []float32{0.9},
			VerifyNs: 3e6, MaxDepth: 16, Drafter: 1, Drafters: 2, BatchSeqs: 1, BatchRows: 2, Offered: []int{-1, 5}}},
		&capsResponse{Minor: 1, Declared: true, Params: []string{"threshold", "draft_max"}},
		&capsResponse{Minor: 1},
		&draftRequest{ID: 6, Q: sdk.DraftRequest{Appended: []int32{1, 2, 3}, MaxDepth: 8, Vocab: 151936}},
		&draftResponse{sdk.DraftResult{Tokens: []int32{4, 5}, Conf: []float32{1, 0.25}}},
		&penaltyRequest{ID: 4, Rows: []sdk.PenaltyRow{
			{History: []int32{1, 2, 1}, IDs: []int32{1, 2}, Logits: []float32{1.5, inf}},
			{History: []int32{}, IDs: []int32{}, Logits: []float32{}},
		}},
		&penaltyResponse{Logits: [][]float32{{1, 2}, {}}},
		&sampleRequest{ID: 5, Round: sdk.SampleRound{Draft: []int32{9, 8}, Seed: math.MaxUint64, Step: 12, Rows: []sdk.SampleRow{
			{IDs: []int32{9, 1}, Logits: []float32{3, inf}, DraftLogit: 3, MaxLogit: 3, LogSumExp: 3.1},
			{IDs: []int32{2}, Logits: []float32{1}, DraftLogit: -2, MaxLogit: 1, LogSumExp: 1.5},
			{IDs: []int32{0}, Logits: []float32{0}},
		}}},
		&sampleResponse{sdk.SampleResult{Accepted: 2, Next: 151642}},
	}
}

// TestPolicyResponseLegacy: a plugin built before keep_cut sends depth and min_conf
// only; that reads as keep_cut false, and an unknown flag is an error.
func TestPolicyResponseLegacy(t *testing.T) {
	full := (&policyResponse{sdk.DepthDecision{Depth: 3, MinConf: 0.5}}).appendTo(nil)
	var got policyResponse
	if err := (codec{}).Unmarshal(full[:12], &got); err != nil || got.DepthDecision != (sdk.DepthDecision{Depth: 3, MinConf: 0.5}) {
		t.Fatalf("legacy response: got %+v, %v", got, err)
	}
	bad := append(full[:12:12], 2, 0, 0, 0)
	if err := (codec{}).Unmarshal(bad, &got); err == nil || !strings.Contains(err.Error(), "unknown flags") {
		t.Fatalf("unknown flag: got %v, want an error naming it", err)
	}
}

func TestCodecRoundTrip(t *testing.T) {
	for _, m := range samples() {
		t.Run(reflect.TypeOf(m).Elem().Name(), func(t *testing.T) {
			b, err := codec{}.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			got := reflect.New(reflect.TypeOf(m).Elem()).Interface().(message)
			if err := (codec{}).Unmarshal(b, got); err != nil {
				t.Fatal(err)
			}
			if pr, ok := m.(*policyRequest); ok {
				got.(*policyRequest).Minor = pr.Minor // the plugin's minor is not sent
			}
			if !reflect.DeepEqual(normalize(got), normalize(m)) {
				t.Fatalf("got %+v\nwant %+v", got, m)
			}
			// Every strict prefix is an error, never a panic — except what earlier
			// versions send: a policy response without its flags word (before keep_cut)
			// or without its drafter, a policy request without the drafter fields.
			for n := range b {
				fresh := reflect.New(reflect.TypeOf(m).Elem()).Interface().(message)
				switch m := m.(type) {
				case *policyResponse:
					if n == 12 || n == 16 && m.Drafter != 0 {
						continue
					}
				case *policyRequest:
					// (a minor-2 request ends with its offers: without them it is minor 1's)
					end := len(b)
					if m.Minor >= 2 {
						end -= 4 + 8*len(m.Last.Offered)
						if n == end {
							continue
						}
					}
					if n == end-16 && (m.Last.Drafters > 1 || m.Minor >= 1) || n == end-32 && m.Minor >= 1 {
						continue
					}
				}
				if err := (codec{}).Unmarshal(b[:n], fresh); err == nil {
					t.Fatalf("prefix of %d/%d bytes: got no error", n, len(b))
				}
			}
			// A trailing byte is an error.
			if err := (codec{}).Unmarshal(append(b, 0), got); err == nil {
				t.Fatal("trailing byte: got no error")
			}
		})
	}
}

// normalize maps empty slices to nil so DeepEqual compares contents.
func normalize(m message) any {
	v := reflect.ValueOf(m).Elem()
	out := reflect.New(v.Type()).Elem()
	out.Set(v)
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Slice:
			if v.Len() == 0 && v.CanSet() {
				v.Set(reflect.Zero(v.Type()))
				return
			}
			for i := range v.Len() {
				walk(v.Index(i))
			}
		case reflect.Struct:
			for i := range v.NumField() {
				walk(v.Field(i))
			}
		}
	}
	walk(out)
	return out.Interface()
}

func TestCodecRejectsHugeCounts(t *testing.T) {
	// A count of 2^32-1 elements in a 12-byte message must fail before allocating.
	b := putU32(putU64(nil, 1), math.MaxUint32)
	if err := (codec{}).Unmarshal(b, &penaltyRequest{}); err == nil {
		t.Fatal("got no error")
	}
	if _, err := (codec{}).Marshal(42); err == nil {
		t.Fatal("Marshal of a non-message: got no error")
	}
	if err := (codec{}).Unmarshal(nil, new(int)); err == nil {
		t.Fatal("Unmarshal into a non-message: got no error")
	}
}

func FuzzUnmarshal(f *testing.F) {
	for _, m := range samples() {
		f.Add(m.appendTo(nil))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, m := range samples() {
			fresh := reflect.New(reflect.TypeOf(m).Elem()).Interface().(message)
			if err := (codec{}).Unmarshal(b, fresh); err == nil {
				// What decodes must encode back to the same bytes (a policy response
				// without flags, to the same bytes and a zero flags word).
				want := string(b)
				if _, ok := fresh.(*policyResponse); ok && len(b) == 12 {
					want += "\x00\x00\x00\x00"
				}
				if got := fresh.appendTo(nil); string(got) != want {
					t.Fatalf("%T: re-encoding differs", fresh)
				}
			}
		}
	})
}

func TestPluginsRoles(t *testing.T) {
	p := Plugins{Penalty: func([]byte) (sdk.Penalty, error) { return nil, nil }}
	if got := p.Roles(); !reflect.DeepEqual(got, []sdk.Role{sdk.RolePenalty}) {
		t.Fatalf("got %v", got)
	}
	if got := (Plugins{}).Roles(); got != nil {
		t.Fatalf("no roles: got %v", got)
	}
	set := serverSet(p)
	if _, ok := set[metaKey]; !ok || len(set) != 2 {
		t.Fatalf("server set: got keys %v, want meta and penalty", reflect.ValueOf(set).MapKeys())
	}
	if n := len(ClientPlugins()[ProtocolVersion]); n != 5 {
		t.Fatalf("client set: got %d entries, want 5 (meta and four roles)", n)
	}
}

// TestPolicyRequestForOldPlugins: a plugin before minor 1 (no Caps) gets a policy
// request without the batch trailer, and without the drafter trailer when the sequence
// offers one drafter: the bytes it was built to read, whose decoder refuses trailing
// bytes.
func TestPolicyRequestForOldPlugins(t *testing.T) {
	o := sdk.RoundOutcome{Round: 2, Depth: 1, Drafted: 1, DraftConf: []float32{0.5}, VerifyNs: 9, MaxDepth: 4,
		Drafters: 1, BatchSeqs: 3, BatchRows: 7}
	old := (&policyRequest{ID: 1, Last: o}).appendTo(nil)
	if want := 8 + 7*8 + 4 + 4; len(old) != want {
		t.Fatalf("minor-0 request: %d bytes, want %d (no trailer)", len(old), want)
	}
	var got policyRequest
	if err := (codec{}).Unmarshal(old, &got); err != nil || got.Last.BatchSeqs != 0 || got.Last.BatchRows != 0 {
		t.Fatalf("minor-0 request: got %+v %v, want batch fields 0", got.Last, err)
	}
	now := (&policyRequest{ID: 1, Last: o, Minor: 1}).appendTo(nil)
	if err := (codec{}).Unmarshal(now, &got); err != nil || got.Last.BatchSeqs != 3 || got.Last.BatchRows != 7 {
		t.Fatalf("minor-1 request: got %+v %v", got.Last, err)
	}
}
