package server

import (
	"strings"
	"testing"
)

// TestBadInputMessages: client mistakes get a 400 that names the field in JSON terms,
// never a Go type or a config key.
func TestBadInputMessages(t *testing.T) {
	_, hs := newTestServer(t, 1)
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	for _, tc := range []struct {
		name, body, param, want string
	}{
		{"top_p zero", `{` + msgs + `,"top_p":0}`, "top_p", "must be > 0"},
		{"repeat_penalty zero", `{` + msgs + `,"repeat_penalty":0}`, "repeat_penalty", "must be > 0"},
		{"negative seed", `{` + msgs + `,"seed":-5}`, "seed", "-1 (random) or ≥ 0"},
		{"extension not an object", `{` + msgs + `,"minfer":"x"}`, "minfer", "want an object"},
		{"body not an object", `[1,2]`, "", "want an object"},
		{"max_tokens a string", `{` + msgs + `,"max_tokens":"ten"}`, "max_tokens", "want an integer"},
		{"temperature a string", `{` + msgs + `,"temperature":"hot"}`, "temperature", "want a number"},
		{"stream a number", `{` + msgs + `,"stream":1}`, "stream", "want a boolean"},
		{"messages an object", `{"messages":{"role":"user"}}`, "messages", "want an array"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := post(t, hs.URL+"/v1/chat/completions", tc.body)
			e, _ := out["error"].(map[string]any)
			msg, _ := e["message"].(string)
			if code != 400 || !strings.Contains(msg, tc.want) || strings.Contains(msg, "server.") || strings.Contains(msg, "[sampling]") {
				t.Fatalf("got %d %q, want 400 with %q and no Go or config names", code, msg, tc.want)
			}
			if tc.param != "" && e["param"] != tc.param {
				t.Fatalf("param: got %v, want %q", e["param"], tc.param)
			}
		})
	}
}
