package stack

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/minfer/minfer/core/config"
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
	srv, st, err := NewServer(t.Context(), cfg, ServerOptions{Stack: o})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	defer srv.Close()
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
