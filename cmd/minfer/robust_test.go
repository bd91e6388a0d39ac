package main

// Hostile-input tests of the whole CLI: every command is run through Main.Run with bad
// files, bad flags, bad configs and bad plugins, and must fail with the documented exit
// code (2 usage, 1 runtime) and a message naming the problem — never a panic, never a
// hang. The corrupt files are made in t.TempDir from the small test models.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minfer/minfer/core/gguf"
	"github.com/minfer/minfer/internal/testpath"
	"github.com/minfer/minfer/internal/wasmtest"
	"github.com/minfer/minfer/sdk"
)

// robustCase is one command line and what it must produce.
type robustCase struct {
	name  string
	args  []string
	stdin string
	code  int    // exit code
	want  string // in the error's message (code ≠ 0) or in stdout+stderr (code 0)
}

// runRobust runs c with a deadline (a hang fails the test instead of stalling it) and
// turns a panic into a test failure that names the command line.
func runRobust(t *testing.T, c robustCase) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	m := &Main{Stdin: strings.NewReader(c.stdin), Stdout: &out, Stderr: &errb}
	var err error
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("minfer %q panicked: %v", c.args, p)
			}
		}()
		err = m.Run(ctx, c.args)
	}()
	if ctx.Err() != nil {
		t.Fatalf("minfer %q: still running after the deadline (a hang); err %v", c.args, err)
	}
	if got := exitCode(err); got != c.code {
		t.Fatalf("minfer %q: exit code got %d, want %d\nerr: %v\nstderr: %s", c.args, got, c.code, err, tail(errb.String()))
	}
	text := out.String() + errb.String()
	if err != nil {
		text = err.Error()
		if strings.Contains(strings.TrimSpace(text), "\n") {
			t.Errorf("minfer %q: error of several lines, want one:\n%s", c.args, text)
		}
	}
	for _, bad := range []string{"goroutine ", "panic(", ".go:"} {
		if strings.Contains(text, bad) || strings.Contains(errb.String(), bad) {
			t.Errorf("minfer %q: output looks like a stack trace (%q):\n%s", c.args, bad, tail(text+errb.String()))
		}
	}
	if !strings.Contains(text, c.want) {
		t.Errorf("minfer %q: got %q, want it to contain %q", c.args, tail(text), c.want)
	}
}

func tail(s string) string {
	if len(s) > 2000 {
		return "…" + s[len(s)-2000:]
	}
	return s
}

// writeFile writes data to dir/name and returns the path.
func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// ggufEdit is a change to a GGUF file: keys to set (nil deletes), tensors to drop, and
// a function that may change a tensor's info.
type ggufEdit struct {
	set    map[string]any
	drop   func(name string) bool
	tensor func(ti *gguf.TensorInfo)
}

// rewriteGGUF writes src with e applied to dir/name and returns the path.
func rewriteGGUF(t *testing.T, src, dir, name string, e ggufEdit) string {
	t.Helper()
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := gguf.NewWriter()
	done := map[string]bool{}
	for _, kv := range f.KVs {
		if kv.Key == gguf.KeyAlignment {
			continue
		}
		var v any = kv.Value
		if nv, ok := e.set[kv.Key]; ok {
			v, done[kv.Key] = nv, true
		}
		if v != nil {
			w.Set(kv.Key, v)
		}
	}
	for k, v := range e.set {
		if !done[k] && v != nil {
			w.Set(k, v)
		}
	}
	for i := range f.Tensors {
		ti := f.Tensors[i]
		if e.drop != nil && e.drop(ti.Name) {
			continue
		}
		data := f.TensorData(&f.Tensors[i])
		if e.tensor != nil {
			e.tensor(&ti)
		}
		w.AddTensor(ti.Name, ti.Type, ti.Dims, data)
	}
	p := filepath.Join(dir, name)
	if err := w.WriteFile(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// trapModule assembles a WebAssembly plugin speaking ABI v1 with one policy "evil"
// whose minfer_policy_next executes `unreachable` (a trap on every call).
func trapModule() []byte {
	return wasmtest.Plugin{Minor: sdk.ABIMinor, Info: wasmtest.PolicyInfo("evil", "0.0.1", sdk.ABIMinor),
		Err: []byte("evil"), Policy: []byte{0x00}}.Bytes()
}

func TestRobustness(t *testing.T) {
	dir := t.TempDir()
	stories := testpath.Path(t, "models", "stories260K.gguf")
	synth := func(name string) string { return testpath.Path(t, "models", "synthetic", name) }
	llamaQ8, llamaQ4, qwen2Q8 := synth("synth-llama-q8_0.gguf"), synth("synth-llama-q4_0.gguf"), synth("synth-qwen2-q8_0.gguf")
	ppl := testpath.Path(t, "golden", "ppl.txt")
	cfg := emptyConfig(t)

	raw, err := os.ReadFile(stories)
	if err != nil {
		t.Fatal(err)
	}
	// hostile files
	empty := writeFile(t, dir, "empty.gguf", nil)
	adir := filepath.Join(dir, "adir.gguf")
	if err := os.Mkdir(adir, 0o755); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.gguf")
	trunc := func(n int) string { return writeFile(t, dir, fmt.Sprintf("trunc%d.gguf", n), raw[:n]) }
	garbage := func(name string, lo, hi int) string {
		b := bytes.Clone(raw)
		for i := lo; i < hi; i++ {
			b[i] = 0xff
		}
		return writeFile(t, dir, name, b)
	}
	// a header claiming 2^40 tensors, and a first key of 2^60 bytes (GGUF v3: magic,
	// version, tensor count, metadata count, then the first key's length)
	header := func(name string, tensors, kvs uint64, rest ...uint64) string {
		b := binary.LittleEndian.AppendUint32([]byte("GGUF"), 3)
		for _, v := range append([]uint64{tensors, kvs}, rest...) {
			b = binary.LittleEndian.AppendUint64(b, v)
		}
		return writeFile(t, dir, name, append(b, make([]byte, 64)...))
	}
	hugeTensors := header("huge-tensors.gguf", 1<<40, 0)
	hugeString := header("huge-string.gguf", 0, 1, 1<<60)
	vocabOnly := rewriteGGUF(t, stories, dir, "vocab-only.gguf", ggufEdit{drop: func(string) bool { return true }})
	mamba := rewriteGGUF(t, stories, dir, "mamba.gguf", ggufEdit{set: map[string]any{"general.architecture": "mamba"}})
	noArch := rewriteGGUF(t, stories, dir, "no-arch.gguf", ggufEdit{set: map[string]any{"general.architecture": nil}})
	noQ := rewriteGGUF(t, stories, dir, "no-q.gguf", ggufEdit{drop: func(n string) bool { return n == "blk.3.attn_q.weight" }})
	badShape := rewriteGGUF(t, stories, dir, "bad-shape.gguf", ggufEdit{tensor: func(ti *gguf.TensorInfo) {
		if ti.Name == "blk.0.attn_k.weight" {
			ti.Dims = []uint64{ti.Dims[0] * 2, ti.Dims[1] / 2}
		}
	}})
	kvHeads3 := rewriteGGUF(t, stories, dir, "kv-heads-3.gguf", ggufEdit{set: map[string]any{"llama.attention.head_count_kv": uint32(3)}})
	layers1000 := rewriteGGUF(t, stories, dir, "layers-1000.gguf", ggufEdit{set: map[string]any{"llama.block_count": uint32(1000)}})
	fewTokens := rewriteGGUF(t, stories, dir, "few-tokens.gguf", ggufEdit{set: map[string]any{"tokenizer.ggml.tokens": []string{"<unk>", "<s>", "</s>"}}})
	badTemplate := rewriteGGUF(t, stories, dir, "bad-template.gguf", ggufEdit{set: map[string]any{"tokenizer.chat_template": "{% if %}"}})
	// text and JSON files
	emptyTxt := writeFile(t, dir, "empty.txt", nil)
	chat := writeFile(t, dir, "chat.json", []byte(`[{"role":"user","content":"Hi"}]`))
	obj := writeFile(t, dir, "obj.json", []byte(`{"role":"user"}`))
	badTrace := writeFile(t, dir, "bad.jsonl", []byte("{garbage\n"))
	trace := writeFile(t, dir, "trace.jsonl", []byte(`{"seq":0,"round":0,"policy":"adaptive","depth":2,"max_depth":14,"drafted":2,"accepted":1,`+
		`"accept":[true,false],"draft_conf":[0.5,0.25],"draft_ns":2000000,"verify_ns":7000000}`+"\n"))
	recorded := filepath.Join(dir, "recorded.jsonl")
	// plugins
	trap := writeFile(t, dir, "trap.wasm", trapModule())
	notWasm := chat
	conf := func(name, body string) string { return writeFile(t, dir, name, []byte(body)) }
	unknownKey := conf("unknown-key.toml", "[model]\nctxx = 5\n")
	wrongType := conf("wrong-type.toml", "[model]\nctx = \"big\"\n")
	badValue := conf("bad-value.toml", "[model]\nctx = -3\n")
	syntax := conf("syntax.toml", "[model\nctx = 5\n")
	badUTF8 := conf("bad-utf8.toml", "[model]\nctx = 5\xff\n")
	missingPlugin := conf("missing-plugin.toml", "[plugins.x]\nsource = \"file:./nope.wasm\"\n[sampling]\nsampler = \"x\"\n")
	notWasmPlugin := conf("not-wasm.toml", fmt.Sprintf("[plugins.x]\nsource = %q\n[sampling]\nsampler = \"x\"\n", "file:"+notWasm))
	bigMemory := conf("big-memory.toml", "[plugins.sampling]\nsource = \"builtin:sampling\"\nmemory_mb = 3000\n")
	trapPolicy := conf("trap.toml", fmt.Sprintf("[plugins.evil]\nsource = %q\n[spec]\npolicy = \"evil\"\n", "file:"+trap))
	builtinKey := conf("builtin-key.toml", "[plugins.static]\nparams = { dpeth = 2 }\n")
	builtinValue := conf("builtin-value.toml", "[plugins.fast]\nsource = \"builtin:static\"\nparams = { depth = -3 }\n")
	missingProcess := conf("missing-process.toml", "[plugins.x]\nsource = \"process:./nope\"\n[spec]\npolicy = \"x\"\n")
	dirPlugin := conf("dir-plugin.toml", fmt.Sprintf("[plugins.x]\nsource = %q\n[spec]\npolicy = \"x\"\n", "file:"+adir))
	trapFallback := conf("trap-fallback.toml", fmt.Sprintf("[plugins.evil]\nsource = %q\n[spec]\npolicy = \"evil\"\nfallback = \"static\"\n", "file:"+trap))

	run := func(args ...string) []string { return append([]string{"run", "--config", cfg}, args...) }
	longPrompt := strings.Repeat("Once upon a time ", 40)
	cases := []robustCase{
		// the happy paths the hostile cases are measured against
		{name: "run embedded", args: run("-p", "Once upon a time", "-n", "4", "--temp", "0"), want: "stop: length"},
		{name: "run invalid UTF-8 prompt", args: run("-p", "\xff\xfe\x80bad", "-n", "2", "--temp", "0"), want: "stop: length"},
		{name: "run huge -n stops at the context", args: run("-p", "Once", "-n", "1000000000", "--ctx", "16", "--temp", "0"), want: "stop: ctx"},
		{name: "run speculative", args: run("-m", llamaQ8, "--draft", llamaQ4, "-p", "hi", "-n", "4", "--temp", "0"), want: "stop: length"},
		{name: "wasm memory cap above 2048 MB", args: []string{"run", "--config", bigMemory, "-p", "hi", "-n", "2", "--temp", "0.5"}, want: "stop: length"},
		// model files
		{name: "missing model", args: run("-m", missing, "-p", "hi"), code: 1, want: "no such file"},
		{name: "directory as model", args: run("-m", adir, "-p", "hi"), code: 1, want: "not a regular file"},
		{name: "empty model", args: run("-m", empty, "-p", "hi"), code: 1, want: "file is empty"},
		{name: "truncated header", args: run("-m", trunc(3), "-p", "hi"), code: 1, want: "too short for a GGUF header"},
		{name: "truncated after header", args: run("-m", trunc(24), "-p", "hi"), code: 1, want: "metadata count 19 exceeds file"},
		{name: "truncated in metadata", args: run("-m", trunc(5000), "-p", "hi"), code: 1, want: "file truncated"},
		{name: "truncated in tensor data", args: run("-m", trunc(600000), "-p", "hi"), code: 1, want: "out of file bounds"},
		{name: "huge tensor count", args: run("-m", hugeTensors, "-p", "hi"), code: 1, want: "huge-tensors.gguf: tensor count 1099511627776 exceeds file"},
		{name: "huge string length", args: run("-m", hugeString, "-p", "hi"), code: 1, want: "string length 1152921504606846976 exceeds file"},
		{name: "inspect huge tensor count", args: []string{"inspect", hugeTensors}, code: 1, want: "tensor count 1099511627776 exceeds file"},
		{name: "tokenize huge string length", args: []string{"tokenize", "-m", hugeString, "hi"}, code: 1, want: "string length 1152921504606846976 exceeds file"},
		{name: "garbage in metadata", args: run("-m", garbage("garbage-meta.gguf", 200, 400), "-p", "hi"), code: 1, want: "exceeds file"},
		{name: "garbage in tensor infos", args: run("-m", garbage("garbage-tensors.gguf", 13000, 13500), "-p", "hi"), code: 1, want: "gguf:"},
		{name: "vocab-only model", args: run("-m", vocabOnly, "-p", "hi"), code: 1, want: "no tensors (a vocabulary-only GGUF?)"},
		{name: "unknown architecture", args: run("-m", mamba, "-p", "hi"), code: 1, want: `unknown architecture "mamba"`},
		{name: "no architecture", args: run("-m", noArch, "-p", "hi"), code: 1, want: "no general.architecture"},
		{name: "missing tensor", args: run("-m", noQ, "-p", "hi"), code: 1, want: "missing: blk.3.attn_q.weight"},
		{name: "wrong tensor shape", args: run("-m", badShape, "-p", "hi"), code: 1, want: `"blk.0.attn_k.weight": shape`},
		{name: "bad head_count_kv", args: run("-m", kvHeads3, "-p", "hi"), code: 1, want: "not a multiple of head_count_kv 3"},
		{name: "huge block_count", args: run("-m", layers1000, "-p", "hi"), code: 1, want: "block_count 1000 exceeds"},
		{name: "vocabulary shorter than scores", args: run("-m", fewTokens, "-p", "hi"), code: 1, want: "few-tokens.gguf: tokenizer: 512 scores for 3 tokens"},
		{name: "perplexity vocabulary shorter than scores", args: []string{"perplexity", "--config", cfg, "-m", fewTokens, "-f", ppl}, code: 1, want: "few-tokens.gguf: tokenizer:"},
		{name: "chat with a broken template", args: run("-m", badTemplate, "-p", "hi", "--chat"), code: 1, want: "chat template"},
		// drafts
		{name: "draft of another vocabulary", args: run("-m", llamaQ8, "--draft", qwen2Q8, "-p", "hi", "-n", "2"), code: 1, want: "differ in tokenizer.ggml.bos_token_id"},
		{name: "draft of another vocabulary size", args: run("-m", llamaQ8, "--draft", stories, "-p", "hi", "-n", "2"), code: 1, want: "draft vocabulary has 512 tokens"},
		{name: "missing draft", args: run("--draft", missing, "-p", "hi"), code: 1, want: "no such file"},
		{name: "vocab-only draft", args: run("--draft", vocabOnly, "-p", "hi"), code: 1, want: "no tensors"},
		// flags
		{name: "negative -n", args: run("-p", "hi", "-n", "-5"), code: 2, want: "run: -n -5: want an integer ≥ -1"},
		{name: "ctx 1", args: run("-p", "hi", "--ctx", "1"), code: 1, want: "does not fit the context of 1"},
		{name: "negative ctx", args: run("-p", "hi", "--ctx", "-5"), code: 2, want: "run: --ctx -5: want an integer in [0, "},
		{name: "kv q3", args: run("-p", "hi", "--kv", "q3"), code: 2, want: `run: --kv q3: unknown cache type "q3"`},
		{name: "kv q8_0 on head size 8", args: run("-p", "hi", "--kv", "q8_0"), code: 1, want: "multiple of 32, have 8"},
		{name: "depth x", args: run("-p", "hi", "--depth", "x"), code: 2, want: `depth "x"`},
		{name: "threads -1", args: run("-p", "hi", "--threads", "-1"), code: 2, want: "run: --threads -1: want an integer in [0, "},
		{name: "temp -1", args: run("-p", "hi", "--temp", "-1"), code: 2, want: "run: --temp -1: want a number ≥ 0"},
		{name: "top-logits -1", args: run("-p", "hi", "--top-logits", "-1", "--json"), code: 2, want: "--top-logits -1"},
		{name: "unknown flag", args: run("-p", "hi", "--frobnicate"), code: 2, want: "-frobnicate"},
		{name: "empty prompt", args: run("-p", ""), code: 2, want: "no prompt"},
		{name: "empty prompt file", args: run("-f", emptyTxt), code: 1, want: "empty.txt is empty"},
		{name: "prompt file is a directory", args: run("-f", dir), code: 1, want: "is a directory"},
		{name: "prompt longer than the context", args: run("-p", longPrompt, "--ctx", "32"), code: 1, want: "does not fit the context of 32"},
		{name: "stray argument", args: run("-p", "hi", "extra"), code: 2, want: `unexpected argument "extra"`},
		// configuration
		{name: "config unknown key", args: []string{"config", "check", unknownKey}, code: 1, want: `ctxx: unknown key; did you mean "ctx"?`},
		{name: "config wrong type", args: []string{"config", "check", wrongType}, code: 1, want: "wrong type string, want an integer"},
		{name: "config bad value", args: []string{"config", "check", badValue}, code: 1, want: "ctx = -3"},
		{name: "config syntax error", args: []string{"config", "check", syntax}, code: 1, want: "syntax.toml:2"},
		{name: "config invalid UTF-8", args: []string{"config", "check", badUTF8}, code: 1, want: "invalid UTF-8"},
		{name: "run with a bad config", args: []string{"run", "--config", unknownKey, "-p", "hi"}, code: 1, want: "unknown key"},
		{name: "config naming missing files", args: []string{"config", "check", missingPlugin}, want: "warning: [plugins.x] source: stat " + filepath.Join(dir, "nope.wasm") + ": no such file"},
		{name: "config missing file", args: []string{"config", "check", missing}, code: 1, want: "missing.gguf"},
		{name: "config built-in params key", args: []string{"config", "check", builtinKey}, code: 1, want: `[plugins.static]: params: unknown key "dpeth": plugin "static" reads depth,`},
		{name: "config built-in params value", args: []string{"config", "check", builtinValue}, code: 1, want: "[plugins.fast]: static: params: depth = -3"},
		{name: "run built-in params key", args: []string{"run", "--config", builtinKey, "-p", "hi"}, code: 1, want: `[plugins.static]: params: unknown key "dpeth"`},
		// plugins
		{name: "sampler file missing", args: []string{"run", "--config", missingPlugin, "-p", "hi"}, code: 1, want: "nope.wasm: no such file"},
		{name: "policy process missing", args: []string{"run", "--config", missingProcess, "-p", "hi"}, code: 1, want: `[plugins.x]: process plugin "x": start: stat ` + filepath.Join(dir, "nope") + ": no such file"},
		{name: "policy file is a directory", args: []string{"run", "--config", dirPlugin, "-p", "hi"}, code: 1, want: "[plugins.x]: read " + adir + ": is a directory"},
		{name: "sampler not wasm", args: []string{"run", "--config", notWasmPlugin, "-p", "hi"}, code: 1, want: "not a valid WebAssembly module"},
		{name: "policy traps", args: []string{"run", "--config", trapPolicy, "-m", llamaQ8, "--draft", llamaQ4, "-p", "hi", "-n", "4", "--temp", "0"}, code: 1, want: `plugin "evil"`},
		{name: "policy traps, fallback takes over", args: []string{"run", "--config", trapFallback, "-m", llamaQ8, "--draft", llamaQ4, "-p", "hi", "-n", "4", "--temp", "0"}, want: `using [spec] fallback "static"`},
		{name: "plugin check not wasm", args: []string{"plugin", "check", notWasm}, code: 1, want: "invalid magic number"},
		{name: "plugin check missing", args: []string{"plugin", "check", missing}, code: 1, want: "no such file"},
		{name: "plugin check trapping module", args: []string{"plugin", "check", trap}, code: 1, want: "checks failed"},
		{name: "plugin check negative timeout", args: []string{"plugin", "check", trap, "--timeout", "-1s"}, code: 2, want: "--timeout -1s"},
		{name: "empty stop string", args: run("-p", "hi", "--stop", ""), code: 2, want: "empty stop string"},
		{name: "top-logits without --json", args: run("-p", "hi", "--top-logits", "3"), code: 2, want: "--top-logits needs --json"},
		{name: "plugin check bad params", args: []string{"plugin", "check", trap, "--params", "{bad"}, code: 2, want: "not a JSON object"},
		{name: "plugin new names the .wasm after the plugin", args: []string{"plugin", "new", "policy", filepath.Join(dir, "My Policy")}, want: "-o my-policy.wasm ."},
		{name: "plugin new bad role", args: []string{"plugin", "new", "chef", filepath.Join(dir, "p")}, code: 2, want: `unknown role "chef"`},
		{name: "policy replay missing trace", args: []string{"policy", "replay", missing, "--policy", "adaptive", "--config", cfg}, code: 1, want: "no such file"},
		{name: "policy replay garbage trace", args: []string{"policy", "replay", badTrace, "--policy", "adaptive", "--config", cfg}, code: 1, want: "trace line 1"},
		{name: "policy replay unknown policy", args: []string{"policy", "replay", trace, "--policy", "nosuch", "--config", cfg}, code: 2, want: `no plugin "nosuch"`},
		{name: "policy replay", args: []string{"policy", "replay", trace, "--policy", "adaptive,static", "--config", cfg}, want: "1 rounds from"},
		{name: "run --trace", args: run("-m", llamaQ8, "--draft", llamaQ4, "-p", "hi", "-n", "4", "--temp", "0", "--trace", recorded), want: "stop: length"},
		{name: "policy replay of run --trace", args: []string{"policy", "replay", recorded, "--policy", "ucb", "--config", cfg}, want: "rounds from"},
		{name: "run --trace into a missing folder", args: run("-p", "hi", "-n", "2", "--trace", filepath.Join(missing, "t.jsonl")), code: 1, want: "no such file"},
		// the other commands
		{name: "bench -r 0", args: []string{"bench", "--config", cfg, "-r", "0"}, code: 2, want: "bench: -r 0: want ≥ 1"},
		{name: "bench threads -1", args: []string{"bench", "--config", cfg, "-t", "-1"}, code: 2, want: "--threads -1"},
		{name: "bench empty model", args: []string{"bench", "--config", cfg, "-m", empty}, code: 1, want: "file is empty"},
		{name: "specbench without draft", args: []string{"specbench", "--config", cfg, "-m", llamaQ8}, code: 2, want: "no draft model"},
		{name: "specbench depths x", args: []string{"specbench", "--config", cfg, "-m", llamaQ8, "--draft", llamaQ4, "--depths", "1,x"}, code: 2, want: `depth "x"`},
		{name: "specbench draft of another vocabulary", args: []string{"specbench", "--config", cfg, "-m", llamaQ8, "--draft", qwen2Q8, "-n", "2", "-r", "1"}, code: 1, want: "differ in tokenizer.ggml.bos_token_id"},
		{name: "perplexity empty text", args: []string{"perplexity", "--config", cfg, "-f", emptyTxt}, code: 1, want: "needs at least"},
		{name: "perplexity ctx 1", args: []string{"perplexity", "--config", cfg, "-f", ppl, "--ctx", "1"}, code: 2, want: "--ctx 1 too small"},
		{name: "perplexity chunks 0", args: []string{"perplexity", "--config", cfg, "-f", ppl, "--chunks", "0"}, code: 2, want: "--chunks 0"},
		{name: "specbench negative warmup", args: []string{"specbench", "--config", cfg, "--draft", "x.gguf", "--warmup", "-1"}, code: 2, want: "--warmup -1"},
		{name: "serve negative grace", args: []string{"serve", "--config", cfg, "--shutdown-grace", "-1s"}, code: 2, want: "--shutdown-grace"},
		{name: "template message without role", args: []string{"template", "--chat-template", "chatml", "--messages", "-"}, stdin: `[{"content":"hi"}]`, code: 1, want: `message 0 has no "role"`},
		{name: "perplexity threads -1", args: []string{"perplexity", "--config", cfg, "-f", ppl, "-t", "-1"}, code: 2, want: "--threads -1"},
		{name: "perplexity vocab-only model", args: []string{"perplexity", "--config", cfg, "-m", vocabOnly, "-f", ppl}, code: 1, want: "no tensors"},
		{name: "serve vocab-only model", args: []string{"serve", "--config", cfg, "-m", vocabOnly, "--addr", "127.0.0.1:0"}, code: 1, want: "no tensors"},
		{name: "tokenize truncated model", args: []string{"tokenize", "-m", trunc(5000), "hi"}, code: 1, want: "file truncated"},
		{name: "tokenize vocab-only model", args: []string{"tokenize", "-m", vocabOnly, "hi"}, want: "<s>"},
		{name: "tokenize GGUF as tokenizer.json", args: []string{"tokenize", "--tokenizer", stories, "hi"}, code: 2, want: "is a GGUF file (give it with -m)"},
		{name: "tokenize non-JSON tokenizer", args: []string{"tokenize", "--tokenizer", emptyTxt, "hi"}, code: 1, want: "unexpected end of JSON input"},
		{name: "detokenize id out of range", args: []string{"detokenize", "-m", stories, "99999"}, code: 1, want: "out of range [0, 512)"},
		{name: "detokenize not an id", args: []string{"detokenize", "-m", stories, "x"}, code: 2, want: `"x" is not a token id`},
		{name: "template not an array", args: []string{"template", "--chat-template", "chatml", "--messages", obj}, code: 1, want: "want a JSON array"},
		{name: "template unknown built-in", args: []string{"template", "--chat-template", "nosuch", "--messages", chat}, code: 2, want: `unknown built-in template "nosuch"`},
		{name: "template model without one", args: []string{"template", "-m", stories, "--messages", chat}, code: 1, want: "no chat template"},
		{name: "inspect empty", args: []string{"inspect", empty}, code: 1, want: "file is empty"},
		{name: "inspect unknown tensor", args: []string{"inspect", stories, "--tensor", "nosuch"}, code: 1, want: `no tensor "nosuch"`},
		{name: "inspect dequant alone", args: []string{"inspect", stories, "--dequant"}, code: 2, want: "--dequant needs --tensor"},
		{name: "synth bad type", args: []string{"synth", "--arch", "llama", "--n-embd", "64", "--n-layer", "1", "--n-head", "4", "--n-ff", "128", "--n-vocab", "300", "--type", "q3", "-o", filepath.Join(dir, "s.gguf")}, code: 2, want: `unknown --type "q3"`},
		{name: "synth into a missing folder", args: []string{"synth", "--arch", "llama", "--n-embd", "64", "--n-layer", "1", "--n-head", "4", "--n-ff", "128", "--n-vocab", "300", "--type", "q8_0", "-o", filepath.Join(missing, "s.gguf")}, code: 1, want: "no such file"},
		{name: "unknown command", args: []string{"frobnicate"}, code: 2, want: `unknown command "frobnicate"`},
		{name: "help COMMAND", args: []string{"help", "inspect"}, want: "Usage: minfer inspect"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { runRobust(t, c) })
	}
}

// TestTrapModuleIsWellFormed guards the hand-assembled module: the conformance kit must
// load it and find its policy, so the failures above are the trap's and not a bad file's.
func TestTrapModuleIsWellFormed(t *testing.T) {
	p := writeFile(t, t.TempDir(), "trap.wasm", trapModule())
	stdout, _, err := runCLI(t, "", "plugin", "check", p)
	if exitCode(err) != 1 || !strings.Contains(stdout, "plugin evil 0.0.1: [policy]") || !strings.Contains(stdout, "FAIL evil") {
		t.Fatalf("got %v, stdout:\n%s", err, stdout)
	}
	if b := trapModule(); binary.LittleEndian.Uint32(b[4:]) != 1 {
		t.Fatalf("wasm version %d, want 1", binary.LittleEndian.Uint32(b[4:]))
	}
}

// TestBenchStopsWhenInterrupted: a pp test far too long to finish must end at the
// context's cancellation (Ctrl-C, SIGTERM), between forwards, with the context's error.
func TestBenchStopsWhenInterrupted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var out, errb bytes.Buffer
	m := &Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb}
	err := m.Run(ctx, []string{"bench", "--config", emptyConfig(t), "-p", "100000", "-n", "0", "-r", "1"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want the context's deadline error", err)
	}
}

// TestRunPromptTooLongNotEchoed: a prompt that cannot fit the context is not echoed to
// stdout (it may be megabytes); only the error names the problem.
func TestRunPromptTooLongNotEchoed(t *testing.T) {
	stdout, _, err := runCLI(t, "", "run", "--config", emptyConfig(t), "-p", "Once upon a time", "--ctx", "4")
	if exitCode(err) != 1 || stdout != "" || !strings.Contains(err.Error(), "does not fit the context of 4") {
		t.Fatalf("got stdout %q, err %v; want nothing on stdout, exit 1", stdout, err)
	}
	stdout, _, err = runCLI(t, "", "run", "--config", emptyConfig(t), "-p", "Once upon a time", "--ctx", "5", "-n", "1", "--temp", "0")
	if err != nil || !strings.HasPrefix(stdout, "Once upon a time") {
		t.Fatalf("a prompt that just fits: got stdout %q, err %v", stdout, err)
	}
}

// TestRunInterrupted: a generation cut short by its context (Ctrl-C) ends with the
// context's error, not with a plugin "timeout" blamed on the sampler. The context is
// cancelled when the command first writes to stdout (the prompt's echo, as generation
// starts), not after a fixed time that start-up alone can take on a loaded machine;
// the deadline only ends a run that never writes.
func TestRunInterrupted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := &cancelOnWrite{cancel: cancel}
	var errb bytes.Buffer
	m := &Main{Stdin: strings.NewReader(""), Stdout: out, Stderr: &errb}
	err := m.Run(ctx, []string{"run", "--config", emptyConfig(t), "-p", "Once", "-n", "-1", "--ctx", "100000", "--temp", "0.8", "--seed", "1"})
	if !errors.Is(err, context.Canceled) || strings.Contains(err.Error(), "timeout") {
		t.Fatalf("got %v, want the context's cancellation error and no plugin timeout", err)
	}
	// the user's interruption: exit 130, the text so far kept, the stop reason said
	if got := exitCode(err); got != 130 || err.Error() != "interrupted" {
		t.Errorf("got exit %d, %q; want 130, \"interrupted\"", got, err)
	}
	if !strings.HasPrefix(out.String(), "Once") || !strings.HasSuffix(out.String(), "\n") || !strings.Contains(errb.String(), "stop: interrupted") {
		t.Errorf("want the text so far ended by a newline on stdout and \"stop: interrupted\" on stderr; got stdout %.80q, stderr %q", out.String(), errb.String())
	}
}

// cancelOnWrite is a stdout that cancels a context at its first write.
type cancelOnWrite struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	cancel context.CancelFunc
}

func (w *cancelOnWrite) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func (w *cancelOnWrite) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cancel()
	return w.buf.Write(b)
}
