package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minfer/minfer/core/config"
	"github.com/minfer/minfer/internal/stack"
)

// TestFlagErrorsAreOneLine: a bad flag or value gets one line naming the flag as typed
// (with a near flag when there is one) and a pointer to --help, never the usage dump;
// a value the config refuses is reported under the flag, not the config key.
func TestFlagErrorsAreOneLine(t *testing.T) {
	cfg := emptyConfig(t)
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"unknown flag", []string{"run", "--frobnicate"}, []string{"run: unknown flag --frobnicate;", "'minfer run --help'"}},
		{"near flag", []string{"run", "--depht", "3"}, []string{"unknown flag --depht (did you mean --depth?)"}},
		{"single dash as typed", []string{"serve", "-nglx", "3"}, []string{"unknown flag -nglx"}},
		{"not an integer", []string{"run", "-n", "abc"}, []string{`run: -n "abc": want an integer`}},
		{"not a number", []string{"run", "--temp", "hot"}, []string{`--temp "hot": want a number`}},
		{"no value", []string{"run", "-p"}, []string{"run: -p needs a value"}},
		{"config value under its flag", []string{"run", "--config", cfg, "--temp", "-1", "-p", "x"}, []string{"run: --temp -1: want a number ≥ 0"}},
		{"llama.cpp flag value", []string{"run", "--config", cfg, "--draft-p-min", "2", "-p", "x"}, []string{"run: --draft-p-min 2: want a number in [0, 1]"}},
		{"serve value", []string{"serve", "--config", cfg, "--top-p", "0"}, []string{"serve: --top-p 0: want a number in (0, 1]"}},
		{"draft-min above draft-max", []string{"run", "--config", cfg, "--draft-max", "2", "--draft-min", "3", "-p", "x"}, []string{"--draft-min 3: want an integer in [0, draft_max = 2]"}},
		{"port", []string{"serve", "--config", cfg, "--port", "70000"}, []string{"--port 70000: want 0..65535"}},
		{"addr", []string{"serve", "--config", cfg, "--addr", "nohost"}, []string{"serve: --addr nohost: want host:port"}},
		{"batch rows", []string{"serve", "--config", cfg, "--batch-rows", "-1"}, []string{"serve: --batch-rows -1: want an integer in [0, "}},
		{"api key env", []string{"serve", "--config", cfg, "--api-key-env", "1x"}, []string{"serve: --api-key-env 1x: want the name of an environment variable"}},
		{"addr and port", []string{"serve", "--config", cfg, "--addr", ":1", "--port", "2"}, []string{"--addr and --host/--port"}},
		{"bench list", []string{"bench", "-p", "64,x"}, []string{`bench: -p "64,x"`}},
		{"chat template", []string{"run", "--config", cfg, "--chat-template", filepath.Join(t.TempDir(), "none.jinja"), "-p", "x", "-n", "1"}, []string{"--chat-template", "not a built-in template"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, err := runCLI(t, "", tc.args...)
			if exitCode(err) != 2 {
				t.Fatalf("got exit %d (%v), want 2", exitCode(err), err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got %q, want it to contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "\n") || strings.Contains(err.Error(), "[sampling]") || strings.Contains(stderr, "Flags:") {
				t.Errorf("want one line naming the flag and no usage; got %q, stderr %q", err, stderr)
			}
		})
	}
	// --help still prints the whole usage
	_, stderr, err := runCLI(t, "", "run", "--help")
	if err != nil || !strings.Contains(stderr, "Flags:") || !strings.Contains(stderr, "-ngl") {
		t.Errorf("run --help: got %v, stderr %.200q", err, stderr)
	}
}

// TestLlamaCppFlags: llama.cpp's spellings set the config keys minfer's own flags do.
func TestLlamaCppFlags(t *testing.T) {
	abs := func(p string) string { a, _ := filepath.Abs(p); return a }
	for _, tc := range []struct {
		name  string
		args  []string
		check func(c *config.Config) bool
	}{
		{"--model", []string{"--model", "t.gguf"}, func(c *config.Config) bool { return c.Model.Path == abs("t.gguf") }},
		{"-md", []string{"-md", "d.gguf"}, func(c *config.Config) bool { return c.Draft.Path == abs("d.gguf") }},
		{"--model-draft", []string{"--model-draft", "d.gguf"}, func(c *config.Config) bool { return c.Draft.Path == abs("d.gguf") }},
		{"-ngl 0 is the CPU", []string{"-ngl", "0"}, func(c *config.Config) bool { return c.Model.Device == config.DeviceCPU }},
		{"-ngl 99 keeps the device", []string{"--n-gpu-layers", "99"}, func(c *config.Config) bool { return c.Model.Device == config.DeviceAuto }},
		{"-ngl 0 with --device", []string{"-ngl", "0", "--device", "cuda"}, func(c *config.Config) bool { return c.Model.Device == config.DeviceCUDA }},
		{"draft bounds", []string{"--draft-max", "6", "--draft-min", "2", "--draft-p-min", "0.4"}, func(c *config.Config) bool {
			return c.Spec.DraftMax == 6 && c.Spec.DraftMin == 2 && c.Spec.MinConf == 0.4
		}},
		{"--draft-n", []string{"--draft-n", "5"}, func(c *config.Config) bool { return c.Spec.DraftMax == 5 }},
		{"penalties", []string{"--presence-penalty", "0.5", "--frequency-penalty", "0.25"}, func(c *config.Config) bool {
			return c.Sampling.PresencePenalty == 0.5 && c.Sampling.FrequencyPenalty == 0.25 && c.Sampling.Penalty == "penalty"
		}},
		{"-c and --ctx-size", []string{"--ctx-size", "128"}, func(c *config.Config) bool { return c.Model.Ctx == 128 }},
		{"--n-predict", []string{"--n-predict", "7"}, func(c *config.Config) bool { return c.Sampling.NPredict == 7 }},
		{"--batch-size", []string{"--batch-size", "64"}, func(c *config.Config) bool { return c.Model.Batch == 64 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f runFlags
			fs := flag.NewFlagSet("run", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			f.define(fs)
			if _, err := parseFlags(fs, tc.args); err != nil {
				t.Fatal(err)
			}
			c := config.Default()
			if err := f.apply(fs, c); err != nil {
				t.Fatal(err)
			}
			if !tc.check(c) {
				t.Errorf("%v: config not set: model %+v draft %+v spec %+v sampling %+v", tc.args, c.Model, c.Draft, c.Spec, c.Sampling)
			}
		})
	}
	// -sys, -e, --ignore-eos, --prompt and --file are run's own
	var f runFlags
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	f.define(fs)
	if _, err := parseFlags(fs, []string{"-sys", "S", "-e", "--ignore-eos", "--prompt", "P", "--file", "F"}); err != nil {
		t.Fatal(err)
	}
	if f.system != "S" || !f.escape || !f.ignoreEOS || f.prompt != "P" || f.file != "F" {
		t.Errorf("got %+v", f)
	}
}

// TestRunLlamaCppHabits runs the embedded model with the flags a llama.cpp user types.
func TestRunLlamaCppHabits(t *testing.T) {
	cfg := emptyConfig(t)
	run := func(stdin string, args ...string) (string, string) {
		t.Helper()
		out, stderr, err := runCLI(t, stdin, append([]string{"run", "--config", cfg, "--temp", "0", "-n", "4"}, args...)...)
		if err != nil {
			t.Fatalf("%v: %v (stderr %q)", args, err, stderr)
		}
		return out, stderr
	}
	if out, _ := run("Once upon a time", "-f", "-"); !strings.HasPrefix(out, "Once upon a time") || len(out) <= len("Once upon a time\n") {
		t.Errorf("-f -: got stdout %q, want the prompt from stdin and a continuation", out)
	}
	if _, stderr := run("", "-p", "x", "--depth", "3", "--draft-max", "4"); !strings.Contains(stderr, "warning: --depth 3 is ignored without a draft model") ||
		!strings.Contains(stderr, "warning: --draft-max 4 is ignored") {
		t.Errorf("--depth without a draft: stderr %q, want warnings", stderr)
	}
	if _, stderr := run("", "-p", "x", "-ngl", "99", "--device", "cpu"); !strings.Contains(stderr, "warning: -ngl 99 is ignored: this run uses the CPU backend") {
		t.Errorf("-ngl on the CPU: stderr %q, want a warning", stderr)
	}
	if _, stderr := run("", "-sys", "Be brief.", "-p", "Hi"); !strings.Contains(stderr, "the model has none; using the built-in chatml") {
		t.Errorf("-sys on a model without a template: stderr %q, want the fallback named", stderr)
	}
	if _, stderr := run("", "--chat", "--chat-template", "llama3", "-p", "Hi"); !strings.Contains(stderr, "chat template: built-in llama3") {
		t.Errorf("--chat-template llama3: stderr %q", stderr)
	}
	tokens := func(args ...string) string {
		out, _ := run("", append(args, "--json")...)
		var r stack.RunJSON
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(r.PromptTokens, r.Tokens)
	}
	plain, esc, tab := tokens("-p", `a\tb`), tokens("-p", `a\tb`, "-e"), tokens("-p", "a\tb")
	if esc != tab || esc == plain {
		t.Errorf("-e: got %q, want the output of a real tab %q (and not of the backslash %q)", esc, tab, plain)
	}
}

func TestServeAddr(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "127.0.0.1:8080"},
		{[]string{"--addr", "0.0.0.0:9000"}, "0.0.0.0:9000"},
		{[]string{"--host", "0.0.0.0"}, "0.0.0.0:8080"},
		{[]string{"--port", "9001"}, "127.0.0.1:9001"},
		{[]string{"--host", "::1", "--port", "9002"}, "[::1]:9002"},
	} {
		var addr, host string
		var port int
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.StringVar(&addr, "addr", "", "")
		fs.StringVar(&host, "host", "", "")
		fs.IntVar(&port, "port", 0, "")
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		c := config.Default()
		if err := serveAddr(fs, c, addr, host, port); err != nil || c.Server.Addr != tc.want {
			t.Errorf("%v: got %q %v, want %q", tc.args, c.Server.Addr, err, tc.want)
		}
	}
}
