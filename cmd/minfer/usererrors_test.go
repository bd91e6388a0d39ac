package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/minfer/minfer/internal/testpath"
)

// TestErrorsNameWhatTheUserGave: a bad flag value fails naming the flag and the value
// as the user typed them — not a key minfer made up ([plugins.replay-0], a plugin named
// after its file, plugin "check"), a config key the user did not write ([server]
// api_key_env for --api-key-env) or a bare package prefix ("kv:" for --kv).
func TestErrorsNameWhatTheUserGave(t *testing.T) {
	dir := t.TempDir()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	cfg := emptyConfig(t)
	notWasm := writeFile(t, dir, "junk.wasm", []byte("not a module"))
	text := writeFile(t, dir, "text.txt", []byte("Once upon a time"))
	trace := filepath.Join("..", "..", "plugins", "check", "simtraces", "kink.jsonl")
	t.Setenv("MINFER_TEST_UNSET_KEY", "")
	for _, c := range []robustCase{
		// a path relative to the working directory, as run's --policy (before: to the config's)
		{name: "policy replay missing file", args: []string{"policy", "replay", "--config", cfg, trace, "--policy", "file:./nope.wasm"}, code: 1,
			want: "--policy file:./nope.wasm: open " + filepath.Join(wd, "nope.wasm") + ": no such file"},
		{name: "policy replay unknown built-in", args: []string{"policy", "replay", "--config", cfg, trace, "--policy", "static,builtin:nope"}, code: 2,
			want: `policy replay: --policy builtin:nope: no built-in plugin "nope"`},
		{name: "policy replay params key", args: []string{"policy", "replay", "--config", cfg, trace, "--policy", "static", "--params", `{"dpeth":2}`}, code: 2,
			want: `policy replay: --params: unknown key "dpeth": plugin "static" reads depth`},
		{name: "policy replay module of several", args: []string{"policy", "replay", "--config", cfg, trace, "--policy", "file:../../plugins/builtin/builtin.wasm"}, code: 1,
			want: "--policy file:../../plugins/builtin/builtin.wasm: " + filepath.Join(wd, "../../plugins/builtin/builtin.wasm") + " declares plugins "},
		{name: "policy replay module of several/hint", args: []string{"policy", "replay", "--config", cfg, trace, "--policy", "file:../../plugins/builtin/builtin.wasm"}, code: 1,
			want: "a flag cannot pick one; declare it in a [plugins.NAME] table named after it"},
		{name: "run drafter not wasm", args: []string{"run", "--config", cfg, "-p", "hi", "-n", "1", "--drafter", "file:" + notWasm}, code: 1,
			want: "--drafter file:" + notWasm + `: plugin "junk": load: not a valid WebAssembly module`},
		{name: "plugin check not wasm", args: []string{"plugin", "check", notWasm}, code: 1,
			want: "plugin check " + notWasm + `: plugin "junk.wasm": load: not a valid WebAssembly module`},
		{name: "specbench policies file", args: []string{"specbench", "--config", cfg, "--draft", testpath.Path(t, "models", "stories260K.gguf"), "--policies", "file:./nope.wasm"}, code: 1,
			want: "--policies file:./nope.wasm: open " + filepath.Join(wd, "nope.wasm") + ": no such file"},
		{name: "specbench policies built-in", args: []string{"specbench", "--config", cfg, "--draft", "x.gguf", "--policies", "builtin:nope"}, code: 2,
			want: `specbench: --policies builtin:nope: no built-in plugin "nope"`},
		{name: "specbench drafters file", args: []string{"specbench", "--config", cfg, "--depths", "0", "--drafters", "ngram,file:" + notWasm}, code: 1,
			want: "--drafters file:" + notWasm + `: plugin "junk": load: not a valid WebAssembly module`},
		{name: "plugin check memory", args: []string{"plugin", "check", notWasm, "--memory-mb", "9999"}, code: 2,
			want: "plugin check: --memory-mb 9999: want 0..4096"},
		{name: "plugin check missing file", args: []string{"plugin", "check", filepath.Join(dir, "nope.wasm")}, code: 1,
			want: "plugin check: open " + filepath.Join(dir, "nope.wasm") + ": no such file"},
		{name: "bench kv", args: []string{"bench", "--config", cfg, "--kv", "q9"}, code: 2, want: `bench: --kv q9: unknown cache type "q9"`},
		{name: "perplexity kv", args: []string{"perplexity", "--config", cfg, "-f", text, "--kv", "q9"}, code: 2, want: `perplexity: --kv q9: unknown cache type "q9"`},
		{name: "bench alias", args: []string{"bench", "--config", cfg, "-b", "0"}, code: 2, want: "bench: -b 0: want ≥ 1"},
		{name: "perplexity alias", args: []string{"perplexity", "--config", cfg, "-f", text, "-b", "-1"}, code: 2, want: "perplexity: -b -1: want ≥ 1"},
		{name: "serve api key env unset", args: []string{"serve", "--config", cfg, "--api-key-env", "MINFER_TEST_UNSET_KEY", "--addr", "127.0.0.1:0"}, code: 1,
			want: "serve: --api-key-env MINFER_TEST_UNSET_KEY: the variable is empty or unset"},
	} {
		t.Run(c.name, func(t *testing.T) { runRobust(t, c) })
	}
}
