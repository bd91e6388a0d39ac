package stack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minfer/minfer/core/config"
	"github.com/minfer/minfer/internal/testpath"
)

// TestRequestDrafter: a request's minfer.drafter replaces [spec] drafter for that
// request — other drafter plugins, several, or none — and the greedy text is the same
// whatever drafts; a drafter the config does not declare or allow, a plugin of another
// role, a repeated or empty name get a 400 naming the field and the problem.
func TestRequestDrafter(t *testing.T) {
	cfg := config.Default()
	cfg.Model.Ctx = 256
	cfg.Server.Parallel = 1
	cfg.Spec.Drafter = "suffix"
	cfg.Server.AllowPlugins = []string{"ngram", "suffix", "adaptive", "greedy"}
	o := testOptions(t)
	srv, _ := testServer(t, cfg, ServerOptions{Stack: o})
	h := srv.Handler()
	post := func(ext string) (int, map[string]any) {
		t.Helper()
		body := `{"prompt":"Tom had a red ball. Tom had a red ball. Tom had a red","max_tokens":40,"temperature":0` + ext + `}`
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/completions", strings.NewReader(body)))
		var out map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("%s: not JSON: %s", ext, rec.Body.String())
		}
		return rec.Code, out
	}
	result := func(ext string) (string, map[string]any) {
		t.Helper()
		code, out := post(ext)
		if code != 200 {
			t.Fatalf("%s: status %d: %v", ext, code, out)
		}
		by, _ := out["minfer"].(map[string]any)["spec"].(map[string]any)["by_drafter"].(map[string]any)
		return out["choices"].([]any)[0].(map[string]any)["text"].(string), by
	}
	plain, _ := result(`,"minfer":{"draft_max":0}`)
	for _, tc := range []struct {
		ext  string
		want []string // the drafters that got rounds
	}{
		{``, []string{"suffix"}},
		{`,"minfer":{"drafter":"ngram"}`, []string{"ngram"}},
		{`,"minfer":{"drafter":"ngram, suffix"}`, []string{"ngram", "suffix"}},
		{`,"minfer":{"drafter":"none"}`, nil},
		{`,"minfer":{"drafter":""}`, nil},
		{`,"speculative.n_max":0`, nil}, // llama-server's bound: no drafting rounds
		{`,"speculative.n_max":0,"minfer":{"draft_max":4}`, []string{"suffix"}},
	} {
		text, by := result(tc.ext)
		if text != plain {
			t.Errorf("%q: text %q, want plain decoding's %q", tc.ext, text, plain)
		}
		if len(by) != len(tc.want) {
			t.Errorf("%q: rounds by drafter %v, want %v", tc.ext, by, tc.want)
		}
		for _, name := range tc.want {
			if r, _ := by[name].(map[string]any); r == nil || r["rounds"].(float64) == 0 {
				t.Errorf("%q: rounds by drafter %v, want rounds for %s", tc.ext, by, name)
			}
		}
	}
	for _, tc := range []struct{ drafter, want string }{
		{"nope", `unknown plugin "nope"`},
		{"ngram,nope", `unknown plugin "nope"`},
		{"static", `plugin "static" is not allowed per request`},
		{"adaptive", `plugin "adaptive" is not a drafter plugin`},
		{"ngram,ngram", `names "ngram" twice`},
		{"ngram,,suffix", "empty name"},
	} {
		code, out := post(fmt.Sprintf(`,"minfer":{"drafter":%q}`, tc.drafter))
		e, _ := out["error"].(map[string]any)
		if code != 400 || e["param"] != "minfer.drafter" || !strings.Contains(fmt.Sprint(e["message"]), tc.want) {
			t.Errorf("drafter %q: status %d, %v; want 400 on minfer.drafter containing %q", tc.drafter, code, out, tc.want)
		}
	}
	if code, out := post(`,"minfer":{"drafter":3}`); code != 400 || out["error"].(map[string]any)["param"] != "minfer.drafter" {
		t.Errorf("drafter 3: status %d, %v; want 400 on minfer.drafter", code, out)
	}
}

// TestRequestDrafterTrap: a WebAssembly drafter that traps (examples/wat-drafter with
// an unreachable at the top of minfer_draft) costs its request nothing but speed: the
// server answers plain decoding's greedy text, reports the drafter off after its one
// failed call (the host discarded the instance), and logs the failure, naming the
// drafter, also when the server is not verbose.
func TestRequestDrafterTrap(t *testing.T) {
	if _, err := exec.LookPath("wat2wasm"); err != nil {
		t.Skip("wat2wasm (wabt) not installed")
	}
	src, err := os.ReadFile(filepath.Join("..", "..", "examples", "wat-drafter", "lookup.wat"))
	if err != nil {
		t.Fatal(err)
	}
	const at = "(local $i i32) (local $k i32) (local $out i32)\n"
	if !bytes.Contains(src, []byte(at)) {
		t.Fatalf("lookup.wat changed: no %q to put the trap after", at)
	}
	dir := t.TempDir()
	wat, wasm := filepath.Join(dir, "trap.wat"), filepath.Join(dir, "trap.wasm")
	if err := os.WriteFile(wat, bytes.Replace(src, []byte(at), []byte(at+"    unreachable\n"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command("wat2wasm", wat, "-o", wasm).CombinedOutput(); err != nil {
		t.Fatalf("wat2wasm: %v\n%s", err, b)
	}
	cfg := config.Default()
	cfg.Model.Ctx = 256
	cfg.Server.Parallel = 1
	cfg.Plugins["trap"] = config.Plugin{Source: "file:" + wasm}.WithDefaults("trap")
	var errb strings.Builder
	o := testOptions(t)
	o.Log = &errb
	srv, _ := testServer(t, cfg, ServerOptions{Stack: o})
	post := func(ext string) map[string]any {
		t.Helper()
		rec := httptest.NewRecorder()
		body := `{"prompt":"Tom had a red ball. Tom had a red ball. Tom had a red","max_tokens":24,"temperature":0,"minfer":{` + ext + `}}`
		srv.Handler().ServeHTTP(rec, httptest.NewRequest("POST", "/v1/completions", strings.NewReader(body)))
		var out map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || rec.Code != 200 {
			t.Fatalf("%s: status %d: %s", ext, rec.Code, rec.Body.String())
		}
		return out
	}
	text := func(out map[string]any) string { return out["choices"].([]any)[0].(map[string]any)["text"].(string) }
	plain := text(post(`"draft_max":0`))
	out := post(`"drafter":"trap"`)
	by := out["minfer"].(map[string]any)["spec"].(map[string]any)["by_drafter"].(map[string]any)
	if text(out) != plain {
		t.Fatalf("trapping drafter: text %q, want plain decoding's %q", text(out), plain)
	}
	if tr, _ := by["trap"].(map[string]any); tr == nil || tr["failed"] != 1.0 || tr["off"] != true {
		t.Fatalf("by_drafter %v: want trap failed once, then off", by)
	}
	if log := errb.String(); strings.Count(log, `drafter "trap" failed`) != 1 || !strings.Contains(log, "unreachable") {
		t.Fatalf("log %q: want the trap once, naming the drafter", log)
	}
}

// TestServeCalibrates: with a draft model and two or more slots, the default batch
// depth ("auto") measures the models' batched forwards when the server starts and says
// what it measured; "off" and a fixed depth measure nothing.
func TestServeCalibrates(t *testing.T) {
	for _, tc := range []struct {
		depth config.BatchDepth
		want  bool
	}{{config.BatchDepthAuto, true}, {config.BatchDepthOff, false}, {1, false}} {
		cfg := config.Default()
		cfg.Model.Ctx = 256
		cfg.Server.Parallel = 2
		cfg.Spec.BatchDepth = tc.depth
		cfg.Draft.Path = testpath.Path(t, "models", "stories260K.gguf")
		var log bytes.Buffer
		o := testOptions(t)
		o.Log = &log
		testServer(t, cfg, ServerOptions{Stack: o})
		got := strings.Contains(log.String(), "batch depth auto: measured in ")
		if got != tc.want {
			t.Errorf("batch_depth %s: calibration logged %v, want %v; log:\n%s", tc.depth, got, tc.want, log.String())
		}
	}
}
