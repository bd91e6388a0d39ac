package wasm

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minfer/minfer/plugins/builtin"
	"github.com/minfer/minfer/sdk"
)

var (
	builtinOnce sync.Once
	builtinMod  *Module
	builtinErr  error
)

// loadBuiltin loads the embedded module once per test binary.
func loadBuiltin(t testing.TB) *Module {
	t.Helper()
	builtinOnce.Do(func() {
		builtinMod, builtinErr = Load(context.Background(), builtin.WASM, Options{Name: "builtin", SHA256: builtin.SHA256(), Timeout: 5 * time.Second, Trusted: true})
	})
	if builtinErr != nil {
		t.Fatal(builtinErr)
	}
	return builtinMod
}

func TestBuiltinModuleDeclaresEveryPlugin(t *testing.T) {
	m := loadBuiltin(t)
	for _, p := range builtin.Plugins {
		got, ok := m.Lookup(p.Info.Name)
		if !ok {
			t.Fatalf("module lacks %q", p.Info.Name)
		}
		if got.Version != p.Info.Version || got.Roles[0] != p.Info.Roles[0] || got.Needs != p.Info.Needs {
			t.Errorf("%s: got %+v, want %+v", p.Info.Name, got, p.Info)
		}
		if got.Checksum != builtin.SHA256() || got.ABIMajor != sdk.ABIMajor {
			t.Errorf("%s: checksum %s ABI %d, want %s %d", p.Info.Name, got.Checksum, got.ABIMajor, builtin.SHA256(), sdk.ABIMajor)
		}
	}
}

func TestChecksumMismatch(t *testing.T) {
	_, err := Load(context.Background(), builtin.WASM, Options{Name: "builtin", SHA256: strings.Repeat("0", 64), CacheDir: "-"})
	if err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("got %v, want a checksum error", err)
	}
}

func TestMemoryCapTooSmall(t *testing.T) {
	_, err := Load(context.Background(), builtin.WASM, Options{Name: "builtin", MemoryMB: 1, Trusted: true})
	if err == nil || !strings.Contains(err.Error(), "more memory than the 1 MB cap") {
		t.Fatalf("got %v, want a memory cap error", err)
	}
}

func TestRolesThroughWasm(t *testing.T) {
	ctx := context.Background()
	m := loadBuiltin(t)

	p, err := m.Policy(ctx, "static", []byte(`{"depth":3,"min_conf":0.25}`), CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	d, err := p.NextDepth(ctx, sdk.RoundOutcome{Round: 0, Depth: 3, Drafted: 3, VerifyNs: 10, MaxDepth: 8})
	if err != nil || d != (sdk.DepthDecision{Depth: 3, MinConf: 0.25}) {
		t.Fatalf("static: got %+v %v, want depth 3 min_conf 0.25", d, err)
	}

	s, err := m.Sampler(ctx, "greedy", nil, CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Needs().TopK != 1 {
		t.Fatalf("greedy needs: got %+v, want TopK 1", s.Needs())
	}
	r := &sdk.SampleRound{Draft: []int32{5, 6}, Rows: []sdk.SampleRow{
		{IDs: []int32{5}, Logits: []float32{1}}, {IDs: []int32{9}, Logits: []float32{1}}, {IDs: []int32{3}, Logits: []float32{1}}}}
	res, err := s.Sample(ctx, r)
	if err != nil || res != (sdk.SampleResult{Accepted: 1, Next: 9}) {
		t.Fatalf("greedy: got %+v %v, want accepted 1 next 9", res, err)
	}

	pen, err := m.Penalty(ctx, "penalty", []byte(`{"repeat_penalty":2,"repeat_last_n":4}`), CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer pen.Close()
	if pen.Window() != 4 {
		t.Fatalf("window: got %d, want 4", pen.Window())
	}
	rows := []sdk.PenaltyRow{{History: []int32{7, 1, 2}, IDs: []int32{7, 1, 2}, Logits: []float32{4, -4, 1}}}
	if err := pen.Apply(ctx, rows); err != nil {
		t.Fatal(err)
	}
	if want := []float32{2, -8, 0.5}; !equalF32(rows[0].Logits, want) {
		t.Fatalf("penalty: got %v, want %v", rows[0].Logits, want)
	}
}

func TestInitErrors(t *testing.T) {
	ctx := context.Background()
	m := loadBuiltin(t)
	for _, tc := range []struct {
		name, plugin, params, want string
		role                       sdk.Role
	}{
		{"unknown key", "adaptive", `{"bogus":1}`, `unknown field "bogus"`, sdk.RolePolicy},
		{"bad range", "sampling", `{"top_p":7}`, "top_p", sdk.RoleSampler},
		{"not json", "static", `{`, "params", sdk.RolePolicy},
		{"wrong role", "greedy", `{}`, "not policy", sdk.RolePolicy},
		{"no such plugin", "nope", `{}`, "no plugin", sdk.RolePolicy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			switch tc.role {
			case sdk.RolePolicy:
				_, err = m.Policy(ctx, tc.plugin, []byte(tc.params), CallOptions{})
			case sdk.RoleSampler:
				_, err = m.Sampler(ctx, tc.plugin, []byte(tc.params), CallOptions{})
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.plugin) {
				t.Fatalf("got %v, want an error naming %q and containing %q", err, tc.plugin, tc.want)
			}
		})
	}
	// the module still serves after failed inits
	p, err := m.Policy(ctx, "adaptive", nil, CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
}

// TestHostile loads hand-assembled modules that misbehave; each must fail with a clear
// error of the right kind, and the host must keep serving.
func TestHostile(t *testing.T) {
	ctx := context.Background()
	okResp := sdk.AppendPolicyResponse(nil, sdk.DepthDecision{Depth: 2})
	huge := sdk.AppendPolicyResponse(nil, sdk.DepthDecision{Depth: 3})
	binary.LittleEndian.PutUint32(huge[4:], 1<<30)
	v10Resp := append([]byte(nil), okResp[:12]...) // hdr 12, depth, min_conf
	binary.LittleEndian.PutUint32(v10Resp, 12)
	badFlag := sdk.AppendPolicyResponse(nil, sdk.DepthDecision{Depth: 2, KeepCut: true})
	badFlag[12] |= 4
	for _, tc := range []struct {
		name     string
		mod      hostile
		loadKind string // error kind at load, or "" when the call fails
		callKind string
		want     string
	}{
		{"well behaved", hostile{policy: bodyOK, resp: okResp}, "", "", ""},
		{"v1.0 response", hostile{policy: bodyOKv10, resp: v10Resp}, "", "", ""},
		{"unknown flag", hostile{policy: bodyOK, resp: badFlag}, "", "malformed", "unknown flags 0x4"},
		{"infinite loop", hostile{policy: bodyLoop}, "", "timeout", "no answer within"},
		{"trap", hostile{policy: bodyTrap}, "", "trap", "unreachable"},
		{"memory bomb", hostile{policy: bodyMemBomb}, "", "trap", "unreachable"},
		{"response outside memory", hostile{policy: bodyOutside}, "", "malformed", "outside memory"},
		{"garbage response", hostile{policy: bodyOK, resp: bytes.Repeat([]byte{0xff}, 12)}, "", "malformed", "policy response"},
		{"huge depth", hostile{policy: bodyOK, resp: huge}, "", "malformed", "depth 1073741824"},
		{"plugin error", hostile{policy: bodyErr}, "", "plugin", "evil says no"},
		{"wrong ABI major", hostile{abiExport: "minfer_abi_v2", policy: bodyOK}, "abi", "", "speaks minfer ABI v2"},
		{"future ABI minor", hostile{minor: 9, policy: bodyOK}, "abi", "", "needs ABI v1.9"},
		{"bad info record", hostile{info: []byte{1, 2, 3}, policy: bodyOK}, "abi", "", "info record"},
		{"not wasm", hostile{}, "load", "", "not a valid WebAssembly module"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := tc.mod.bytes()
			if tc.name == "not wasm" {
				bin = []byte("\x00asm garbage")
			}
			m, err := Load(ctx, bin, Options{Name: "evil", Timeout: 250 * time.Millisecond, MemoryMB: 4, CacheDir: "-", Instances: 1})
			if tc.loadKind != "" {
				checkErr(t, err, tc.loadKind, tc.want)
				return
			}
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			defer m.Close(ctx)
			p, err := m.Policy(ctx, "evil", nil, CallOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			d, err := p.NextDepth(ctx, sdk.RoundOutcome{Round: -1, MaxDepth: 8})
			if tc.callKind == "" {
				if err != nil || d.Depth != 2 {
					t.Fatalf("got %+v %v, want depth 2", d, err)
				}
				return
			}
			checkErr(t, err, tc.callKind, tc.want)
			if _, again := p.NextDepth(ctx, sdk.RoundOutcome{Round: -1}); again == nil {
				t.Fatal("a failed handle answered again")
			}
			if tc.callKind == "timeout" || tc.callKind == "trap" {
				return
			}
			// the module hands out a fresh, working instance after the failure
			p2, err := m.Policy(ctx, "evil", nil, CallOptions{})
			if err != nil {
				t.Fatalf("new instance after failure: %v", err)
			}
			p2.Close()
		})
	}
	// and the process keeps serving real plugins
	m := loadBuiltin(t)
	p, err := m.Policy(ctx, "adaptive", nil, CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.NextDepth(ctx, sdk.RoundOutcome{Round: -1, MaxDepth: 4}); err != nil {
		t.Fatal(err)
	}
}

// A trusted module cannot be interrupted; a late answer is still a timeout error.
func TestTrustedLateAnswer(t *testing.T) {
	ctx := context.Background()
	bin := hostile{policy: bodySlow, resp: sdk.AppendPolicyResponse(nil, sdk.DepthDecision{Depth: 2})}.bytes()
	m, err := Load(ctx, bin, Options{Name: "evil", Timeout: time.Millisecond, CacheDir: "-", Instances: 1, Trusted: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	p, err := m.Policy(ctx, "evil", nil, CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	_, err = p.NextDepth(ctx, sdk.RoundOutcome{Round: -1})
	checkErr(t, err, "timeout", "answered after")
}

func checkErr(t *testing.T, err error, kind, want string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("got %v (%T), want *wasm.Error", err, err)
	}
	if e.Kind != kind || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "evil") {
		t.Fatalf("got %q (kind %s), want kind %s naming the plugin and containing %q", err, e.Kind, kind, want)
	}
}

func TestPrefixWriter(t *testing.T) {
	var buf bytes.Buffer
	w := &prefixWriter{w: &buf, prefix: "[plugin x] "}
	w.Write([]byte("hello\nwor"))
	w.Write([]byte("ld\n"))
	if got, want := buf.String(), "[plugin x] hello\n[plugin x] world\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func equalF32(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
