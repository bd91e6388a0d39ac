package wasm

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minfer/minfer/internal/drafttest"
	"github.com/minfer/minfer/internal/wasmtest"
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
	// bodyOK answers 16 bytes: a v1.1 response (hdr 16, no drafter), which a v1.2 host
	// reads as drafter 0
	v11 := func(d sdk.DepthDecision) []byte {
		b := sdk.AppendPolicyResponse(nil, d)[:16]
		binary.LittleEndian.PutUint32(b, 16)
		return b
	}
	okResp := v11(sdk.DepthDecision{Depth: 2})
	huge := v11(sdk.DepthDecision{Depth: 3})
	binary.LittleEndian.PutUint32(huge[4:], 1<<30)
	v10Resp := append([]byte(nil), okResp[:12]...) // hdr 12, depth, min_conf
	binary.LittleEndian.PutUint32(v10Resp, 12)
	badFlag := v11(sdk.DepthDecision{Depth: 2, KeepCut: true})
	v12 := sdk.AppendPolicyResponse(nil, sdk.DepthDecision{Depth: 2, Drafter: 3})
	badDrafter := sdk.AppendPolicyResponse(nil, sdk.DepthDecision{Depth: 2})
	binary.LittleEndian.PutUint32(badDrafter[16:], uint32(sdk.MaxDrafters))
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
		{"v1.2 response", hostile{minor: 2, policy: i64c(sdk.Pack(addrResp, 20)), resp: v12}, "", "", ""},
		{"drafter out of range", hostile{minor: 2, policy: i64c(sdk.Pack(addrResp, 20)), resp: badDrafter}, "", "malformed", "drafter 256 outside"},
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
		{"WASI command", hostile{policy: bodyOK, resp: okResp, extra: []wasmtest.Func{{Name: "_start"}}}, "abi", "", "exports _start: a WASI command module"},
		{"8-byte response", hostile{policy: i64c(sdk.Pack(addrResp, 8)), resp: []byte{8, 0, 0, 0, 2, 0, 0, 0}}, "", "malformed", "hdr 8, below the minimum 12 (hdr, depth, min_conf)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := tc.mod.bytes()
			if tc.name == "not wasm" {
				bin = []byte("\x00asm garbage")
			}
			// A short deadline only where the module must miss it (the others answer at
			// once, but 250 ms can pass on a loaded 2-core machine before they do).
			timeout := 30 * time.Second
			if tc.callKind == "timeout" {
				timeout = 250 * time.Millisecond
			}
			m, err := Load(ctx, bin, Options{Name: "evil", Timeout: timeout, MemoryMB: 4, CacheDir: "-", Instances: 1})
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

// TestHostileDrafter: a drafter's answer that breaks the contract (more tokens than
// asked, ids outside the vocabulary, NaN or out-of-range confidences, a truncated
// response) is a malformed error naming the plugin and role; a good one is returned.
func TestHostileDrafter(t *testing.T) {
	ctx := context.Background()
	resp := func(toks []int32, conf []float32) []byte {
		return sdk.AppendDraftResponse(nil, sdk.DraftResult{Tokens: toks, Conf: conf})
	}
	nan := float32(math.NaN())
	q := &sdk.DraftRequest{Appended: []int32{1, 2, 3}, MaxDepth: 2, Vocab: 10}
	for _, tc := range []struct {
		name string
		resp []byte
		want string // "" = valid
	}{
		{"good", resp([]int32{4, 9}, []float32{1, 0}), ""},
		{"nothing", resp(nil, nil), ""},
		{"too many", resp([]int32{4, 5, 6}, []float32{1, 1, 1}), "3 draft tokens, at most 2"},
		{"outside vocab", resp([]int32{10}, []float32{1}), "outside the vocabulary [0, 10)"},
		{"negative id", resp([]int32{-3}, []float32{1}), "outside the vocabulary"},
		{"nan conf", resp([]int32{4}, []float32{nan}), "confidence NaN"},
		{"conf below 0", resp([]int32{4}, []float32{-0.5}), "confidence -0.5"},
		{"truncated", resp([]int32{4, 5}, []float32{1, 1})[:16], "truncated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := wasmtest.Plugin{Minor: sdk.ABIMinor, Info: wasmtest.DrafterInfo("evil", "0"), Err: []byte("no"),
				Policy: bodyErr, Draft: i64c(sdk.Pack(addrResp, uint32(len(tc.resp)))), Resp: tc.resp}.Bytes()
			m, err := Load(ctx, bin, Options{Name: "evil", MemoryMB: 4, CacheDir: "-", Instances: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close(ctx)
			d, err := m.Drafter(ctx, "evil", nil, CallOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			res, err := d.Draft(ctx, q)
			if tc.want == "" {
				if err != nil || len(res.Tokens) != len(res.Conf) {
					t.Fatalf("got %+v %v, want a valid answer", res, err)
				}
				return
			}
			checkErr(t, err, "malformed", tc.want)
			if !strings.Contains(err.Error(), `plugin "evil" drafter`) {
				t.Fatalf("error %q does not name the plugin and role", err)
			}
		})
	}
}

// A module of ABI v1.1 cannot declare a drafter (the role came with v1.2).
func TestDrafterNeedsMinor2(t *testing.T) {
	info := wasmtest.DrafterInfo("evil", "0")
	binary.LittleEndian.PutUint16(info[6:], 1)
	bin := wasmtest.Plugin{Minor: 1, Info: info, Policy: bodyErr, Draft: bodyErr}.Bytes()
	_, err := Load(context.Background(), bin, Options{Name: "evil", CacheDir: "-", Instances: 1})
	checkErr(t, err, "abi", "roles 0x8")
}

// TestDraftersThroughWasm: the built-in drafters answer the same through the module as
// natively, round after round, fed a sequence in uneven chunks.
func TestDraftersThroughWasm(t *testing.T) {
	for _, name := range []string{"ngram", "suffix"} {
		t.Run(name, func(t *testing.T) { drafterParity(t, name) })
	}
}

func drafterParity(t *testing.T, name string) {
	ctx := context.Background()
	m := loadBuiltin(t)
	params := map[string]string{"ngram": `{"n_min":1,"n_max":3}`, "suffix": `{"min_prob":0.3}`}[name]
	w, err := m.Drafter(ctx, name, []byte(params), CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	p, _ := builtin.Lookup(name)
	n, err := p.NewDrafter([]byte(params))
	if err != nil {
		t.Fatal(err)
	}
	seq := []int32{5, 6, 7, 8, 1, 5, 6, 7, 2, 5, 6, 9, 5, 6, 7, 8, 1, 3, 5, 6}
	drafted := 0
	for i, step := 0, 1; i < len(seq); i, step = i+step, step%4+1 {
		q := sdk.DraftRequest{Appended: seq[i:min(i+step, len(seq))], MaxDepth: 1 + i%5, Vocab: 10}
		got, err := w.Draft(ctx, &q)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := n.Draft(ctx, &q)
		if !slices.Equal(got.Tokens, want.Tokens) || !slices.Equal(got.Conf, want.Conf) {
			t.Fatalf("after %d tokens: wasm %+v, native %+v", i+step, got, want)
		}
		drafted += len(got.Tokens)
	}
	if drafted == 0 {
		t.Fatalf("%s proposed nothing on a repetitive sequence", name)
	}
}

// TestErrorsNameTheConfigName: a plugin declared under another name than the module
// gives it ([plugins.mine] running the module's "evil") is named both ways in errors.
func TestErrorsNameTheConfigName(t *testing.T) {
	ctx := context.Background()
	m, err := Load(ctx, hostile{policy: bodyErr}.bytes(), Options{Name: "evil.wasm", Timeout: 30 * time.Second, MemoryMB: 4, CacheDir: "-", Instances: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	p, err := m.Policy(ctx, "evil", nil, CallOptions{Config: "mine"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	_, err = p.NextDepth(ctx, sdk.RoundOutcome{Round: -1, MaxDepth: 8})
	if want := `plugin "mine" (the module's plugin "evil") policy: plugin: evil says no`; err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
	if _, err := m.Sampler(ctx, "evil", nil, CallOptions{Config: "mine"}); err == nil || !strings.Contains(err.Error(), `plugin "mine" (the module's plugin "evil") sampler: load`) {
		t.Fatalf("wrong role: got %v", err)
	}
}

// TestDrafterManySequences: a module instance serves sequence after sequence (a
// server's requests) without its memory growing. The suffix drafter in builtin.wasm
// ran out of memory after ~900 sequences of drafttest's 2,048 tokens under the 64 MB
// default, because the guest's garbage collector never finished a cycle (sdk/guest's
// yield); under a 16 MB cap it failed within 300.
func TestDrafterManySequences(t *testing.T) {
	ctx := context.Background()
	m, err := Load(ctx, builtin.WASM, Options{Name: "builtin", Timeout: 5 * time.Second, Trusted: true, MemoryMB: 16, Instances: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	seq := drafttest.CopyHeavy()
	for i := range 400 {
		d, err := m.Drafter(ctx, "suffix", nil, CallOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := drafttest.Rounds(ctx, d, seq); err != nil {
			t.Fatalf("sequence %d: %v", i, err)
		}
		d.Close()
	}
}
