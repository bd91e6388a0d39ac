package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/minfer/minfer/core/backend/cpu"
)

// TestHostileChatTemplateKeepsServing: a chat template that recurses, allocates
// without end or loops for ever (before renders were bounded: a fatal stack overflow
// on the first chat request, a fatal out of memory, a render that ignored shutdown)
// answers 400 naming the template and the limit, and the server keeps serving.
func TestHostileChatTemplateKeepsServing(t *testing.T) {
	for _, tc := range []struct{ name, src, limit string }{
		{"recursion", `{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}`, "nesting depth exceeds"},
		{"range", `{% for i in range(1000000000) %}{{ i }}{% endfor %}`, "items in one list exceeds"},
		{"loops", `{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}`, "steps exceeds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, hs := serveStories(t, cpu.New(cpu.Options{Threads: 1}), Options{
				ModelID: "stories260K", Parallel: 1, QueueSize: 4, Resolver: testResolver{}, ChatTemplate: tc.src,
			})
			code, out := post(t, hs.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`)
			msg, _ := out["error"].(map[string]any)["message"].(string)
			if code != http.StatusBadRequest || !strings.Contains(msg, "chat template override: render stopped: "+tc.limit) {
				t.Fatalf("got %d %q, want 400 naming the template and %q", code, msg, tc.limit)
			}
			resp, err := http.Get(hs.URL + "/health")
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("/health after the render: %v %v", resp, err)
			}
			resp.Body.Close()
			if code, out := post(t, hs.URL+"/v1/completions", `{"prompt":"Once","max_tokens":2,"temperature":0}`); code != http.StatusOK {
				t.Fatalf("completion after the render: %d %v", code, out)
			}
		})
	}
}
