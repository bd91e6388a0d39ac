package main

import (
	"strings"
	"testing"

	"github.com/minfer/minfer/internal/testpath"
)

// TestHostileChatTemplates: a GGUF whose tokenizer.chat_template recurses, allocates
// without end or loops for ever makes `template` and `run --chat` fail with an error
// naming the template and the limit (before renders were bounded: a fatal stack
// overflow, a fatal out of memory, or a render that ignored SIGTERM for minutes).
func TestHostileChatTemplates(t *testing.T) {
	dir := t.TempDir()
	stories := testpath.Path(t, "models", "stories260K.gguf")
	cfg := emptyConfig(t)
	chat := writeFile(t, dir, "chat.json", []byte(`[{"role":"user","content":"Hi"}]`))
	for _, tc := range []struct{ name, src, limit string }{
		{"recursion", `{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}`, "nesting depth exceeds"},
		{"range", `{% for i in range(1000000000) %}{{ i }}{% endfor %}`, "items in one list exceeds"},
		{"doubling", `{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s }}`, "bytes in one value exceeds"},
		{"loops", `{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}`, ""}, // steps, or time on a loaded machine
	} {
		model := rewriteGGUF(t, stories, dir, tc.name+".gguf", ggufEdit{set: map[string]any{"tokenizer.chat_template": tc.src}})
		want := "chat template tokenizer.chat_template: render stopped: "
		t.Run(tc.name+"/template", func(t *testing.T) {
			runRobust(t, robustCase{args: []string{"template", "-m", model, "--messages", chat}, code: 1, want: want + tc.limit})
		})
		t.Run(tc.name+"/run --chat", func(t *testing.T) {
			runRobust(t, robustCase{args: []string{"run", "--config", cfg, "-m", model, "-p", "hi", "--chat", "-n", "2"}, code: 1, want: want})
		})
	}
}

// TestHostileChatTemplateFiles: a --chat-template FILE that recurses, does not parse or
// fails on the plainest conversation stops run and serve at start (exit 2), naming the
// file — before, serve started and failed every chat request with "chat template
// override".
func TestHostileChatTemplateFiles(t *testing.T) {
	dir := t.TempDir()
	cfg := emptyConfig(t)
	for _, tc := range []struct{ name, src, want string }{
		{"recursion", `{% macro a(n) %}{{ b(n) }}{% endmacro %}{% macro b(n) %}{{ a(n) }}{% endmacro %}{{ a(0) }}`, "render stopped: nesting depth exceeds"},
		{"parse error", `{% for m in messages %}{{ m.content }}`, "jinja parse"},
		{"raises", `{{ raise_exception('no system message') }}`, "no system message"},
	} {
		file := writeFile(t, dir, strings.ReplaceAll(tc.name, " ", "-")+".jinja", []byte(tc.src))
		want := "--chat-template: tokenizer: chat template " + file + ": "
		t.Run(tc.name+"/run", func(t *testing.T) {
			runRobust(t, robustCase{args: []string{"run", "--config", cfg, "--chat-template", file, "-p", "hi", "-n", "2"}, code: 2, want: want})
			runRobust(t, robustCase{args: []string{"run", "--config", cfg, "--chat-template", file, "-p", "hi", "-n", "2"}, code: 2, want: tc.want})
		})
		t.Run(tc.name+"/serve", func(t *testing.T) {
			runRobust(t, robustCase{args: []string{"serve", "--config", cfg, "--chat-template", file, "--addr", "127.0.0.1:0"}, code: 2, want: want})
		})
	}
}
