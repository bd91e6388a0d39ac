package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/minfer/minfer/core/config"
	"github.com/minfer/minfer/core/engine"
	"github.com/minfer/minfer/core/kv"
	"github.com/minfer/minfer/core/tokenizer"
	"github.com/minfer/minfer/internal/repl"
	"github.com/minfer/minfer/internal/stack"
	"github.com/minfer/minfer/sdk"
)

func init() {
	register(&command{name: "run", summary: "generate text from a prompt (speculative with --draft; --chat for a conversation)", run: runRun})
}

const runUsage = `
Usage: minfer run [-m MODEL] [-p PROMPT | -f FILE] [flags]

Generates text from a prompt and streams it to stdout; timings go to stderr. With no
-m and no [model] path in minfer.toml, runs the embedded stories260K model. With
--draft, decodes speculatively: each round the draft proposes tokens and the target
verifies them in one forward (greedy output is identical to plain decoding). --drafter
does the same without a draft model: ngram (built in) proposes tokens copied from the
prompt.
Sampling and penalties run through the plugins named in minfer.toml (or --sampler,
--penalty, --policy); --temp 0 is greedy. llama.cpp's spellings work too: --model,
-md/--model-draft, -ngl (0 = --device cpu; other values are ignored: every layer runs
on one device), --draft-min, --draft-p-min, -sys, -e, --ignore-eos, -c/--ctx-size.
Ctrl-C ends the generation, keeps what was printed and exits with status 130.

Examples:
  minfer run -p "Once upon a time"
  minfer run -m qwen2.5-0.5b-q8_0.gguf -p "The capital of France is" -n 32 --temp 0
  minfer run -m target.gguf --draft draft.gguf --depth auto -p "def main():" --verbose
  minfer run -m target.gguf --drafter ngram -f edit.txt --temp 0   # no draft model
  minfer run -m model.gguf -f prompt.txt --json --top-logits 5 -n 0
  minfer run -m chat.gguf --chat            # a conversation on stdin
  minfer run -m chat.gguf -sys "Answer briefly." -p "Why is the sky blue?"
  minfer run -m base.gguf --chat --chat-template chatml
  echo "Once upon a time" | minfer run -f - -n 32
`

// runFlags are the flags of the generating commands (run; serve and specbench take
// the model and spec groups). Flags left unset keep minfer.toml's values. llama.cpp's
// spellings are accepted beside minfer's (-ngl, -md, --draft-p-min, -sys, …).
type runFlags struct {
	configPath, modelPath, draftPath, prompt, file string
	n, ctx, batch, threads, topK, repeatLastN      int
	temp, topP, minP, repeatPenalty                float64
	presencePenalty, frequencyPenalty, draftPMin   float64
	seed                                           int64
	kvType, depth, policy, sampler, penalty        string
	device, trace, system, chatTemplate, cpuOrder  string
	draftMax, draftMin, topLogits, ngl, ngld       int
	chat, jsonOut, verbose, escape, ignoreEOS      bool
	stops                                          stringList
	drafter                                        string
}

// defineModel defines the flags that choose the models and where they run.
func (f *runFlags) defineModel(fs *flag.FlagSet) {
	fs.StringVar(&f.configPath, "config", "", "minfer.toml to read (default: ./minfer.toml or the user config)")
	fs.StringVar(&f.modelPath, "m", "", "model GGUF file (default: [model] path, else the embedded stories260K)")
	fs.StringVar(&f.modelPath, "model", "", "alias of -m")
	fs.StringVar(&f.draftPath, "draft", "", "draft model GGUF for speculative decoding")
	fs.StringVar(&f.draftPath, "md", "", "alias of --draft (llama.cpp's -md/--model-draft)")
	fs.StringVar(&f.draftPath, "model-draft", "", "alias of --draft")
	fs.IntVar(&f.ctx, "ctx", 0, "context length per sequence (0: the model's, at most 4096)")
	fs.IntVar(&f.ctx, "c", 0, "alias of --ctx")
	fs.IntVar(&f.ctx, "ctx-size", 0, "alias of --ctx")
	fs.IntVar(&f.threads, "threads", 0, "CPU threads (0: physical cores)")
	fs.IntVar(&f.threads, "t", 0, "alias of --threads")
	fs.StringVar(&f.kvType, "kv", "", "KV cache type: f16 or q8_0")
	fs.StringVar(&f.cpuOrder, "cpu-order", "", "llama.cpp CPU build whose rounding the CPU backend reproduces: avx512 or avx2")
	fs.StringVar(&f.device, "device", "", "backend: auto, cpu or cuda (default: [model] device, auto)")
	fs.IntVar(&f.ngl, "ngl", -1, "llama.cpp's GPU layers: minfer runs every layer on one device; 0 means --device cpu, other values are ignored")
	fs.IntVar(&f.ngl, "n-gpu-layers", -1, "alias of -ngl")
	fs.IntVar(&f.ngld, "ngld", -1, "llama.cpp's draft GPU layers (-ngl for the draft): ignored, the draft runs where the target does")
	fs.IntVar(&f.ngld, "n-gpu-layers-draft", -1, "alias of -ngld")
	fs.StringVar(&f.trace, "trace", "", "record every speculative round as JSON lines in `FILE` (for minfer policy replay)")
}

// defineSpec defines the speculative-decoding flags (all but --depth).
func (f *runFlags) defineSpec(fs *flag.FlagSet) {
	fs.IntVar(&f.draftMax, "draft-max", 0, "largest draft depth ([spec] draft_max)")
	fs.IntVar(&f.draftMax, "draft-n", 0, "alias of --draft-max")
	fs.IntVar(&f.draftMin, "draft-min", 0, "least depth of a round that drafts ([spec] draft_min; 0: off)")
	fs.Float64Var(&f.draftPMin, "draft-p-min", 0, "stop drafting below this draft probability ([spec] min_conf, a floor under every policy's cut-off)")
	fs.StringVar(&f.policy, "policy", "", "depth-policy plugin: a declared `NAME` or a source (builtin:NAME, file:x.wasm, process:./x)")
	fs.StringVar(&f.drafter, "drafter", "", "drafter plugins, comma-separated (ngram, suffix, a name or file:x.wasm): speculate without a draft model, or beside it")
}

// defineSampling defines the sampling and penalty flags.
func (f *runFlags) defineSampling(fs *flag.FlagSet) {
	fs.Float64Var(&f.temp, "temp", 0, "temperature (0: greedy)")
	fs.Int64Var(&f.seed, "seed", 0, "sampling seed (-1: random)")
	fs.Int64Var(&f.seed, "s", 0, "alias of --seed")
	fs.IntVar(&f.topK, "top-k", 0, "top-k sampling (0: off)")
	fs.Float64Var(&f.topP, "top-p", 0, "top-p sampling (1: off)")
	fs.Float64Var(&f.minP, "min-p", 0, "min-p sampling (0: off)")
	fs.Float64Var(&f.repeatPenalty, "repeat-penalty", 0, "repetition penalty (1: off)")
	fs.IntVar(&f.repeatLastN, "repeat-last-n", 0, "tokens the penalty looks back over")
	fs.Float64Var(&f.presencePenalty, "presence-penalty", 0, "presence penalty (0: off)")
	fs.Float64Var(&f.frequencyPenalty, "frequency-penalty", 0, "frequency penalty (0: off)")
	fs.StringVar(&f.sampler, "sampler", "", "sampler plugin: a declared `NAME` or a source (builtin:NAME, file:x.wasm, process:./x)")
	fs.StringVar(&f.penalty, "penalty", "", "penalty plugin: a declared `NAME` or a source, or none")
}

func (f *runFlags) define(fs *flag.FlagSet) {
	f.defineModel(fs)
	f.defineSpec(fs)
	f.defineSampling(fs)
	fs.StringVar(&f.prompt, "p", "", "prompt text")
	fs.StringVar(&f.prompt, "prompt", "", "alias of -p")
	fs.StringVar(&f.file, "f", "", "read the prompt from `FILE` (- for stdin)")
	fs.StringVar(&f.file, "file", "", "alias of -f")
	fs.BoolVar(&f.escape, "e", false, "process escapes in the prompt (\\n, \\t, \\\\, \\xHH, …) as llama.cpp's -e does")
	fs.BoolVar(&f.escape, "escape", false, "alias of -e")
	fs.IntVar(&f.n, "n", 0, "tokens to generate (-1: until end of text or a full context)")
	fs.IntVar(&f.n, "predict", 0, "alias of -n")
	fs.IntVar(&f.n, "n-predict", 0, "alias of -n")
	fs.IntVar(&f.batch, "batch", 0, "prompt tokens per forward")
	fs.IntVar(&f.batch, "b", 0, "alias of --batch")
	fs.IntVar(&f.batch, "batch-size", 0, "alias of --batch")
	fs.BoolVar(&f.ignoreEOS, "ignore-eos", false, "keep generating past end-of-generation tokens (they are generated as any other token)")
	fs.BoolVar(&f.chat, "chat", false, "apply the model's chat template; without -p/-f, chat on stdin")
	fs.BoolVar(&f.chat, "cnv", false, "alias of --chat")
	fs.StringVar(&f.system, "sys", "", "system prompt (implies --chat)")
	fs.StringVar(&f.system, "system-prompt", "", "alias of -sys")
	fs.StringVar(&f.chatTemplate, "chat-template", "", "chat template (implies --chat): a built-in `NAME` ("+strings.Join(tokenizer.BuiltinTemplateNames(), ", ")+") or a Jinja template FILE (default: the model's)")
	fs.BoolVar(&f.jsonOut, "json", false, "print one JSON object instead of streaming text")
	fs.IntVar(&f.topLogits, "top-logits", 0, "with --json: the K best logits of the last prompt position")
	fs.StringVar(&f.depth, "depth", "", "draft depth per round: N or auto (the policy plugin)")
	fs.BoolVar(&f.verbose, "verbose", false, "print speculative statistics (rounds, acceptance by depth, time split) to stderr")
	fs.Var(&f.stops, "stop", "stop string (repeatable)")
}

// flagAliases maps every alias to the flag it spells.
var flagAliases = map[string]string{
	"model": "m", "md": "draft", "model-draft": "draft", "c": "ctx", "ctx-size": "ctx",
	"t": "threads", "n-gpu-layers": "ngl", "n-gpu-layers-draft": "ngld", "draft-n": "draft-max",
	"s": "seed", "prompt": "p", "file": "f", "escape": "e", "predict": "n", "n-predict": "n",
	"b": "batch", "batch-size": "batch", "cnv": "chat", "system-prompt": "sys", "np": "parallel",
}

// canonical is the name of the flag that name spells.
func canonical(name string) string {
	if c, ok := flagAliases[name]; ok {
		return c
	}
	return name
}

// apply overrides cfg with the flags the user set and validates the result; a value
// the config refuses is reported under the flag that set it.
func (f *runFlags) apply(fs *flag.FlagSet, cfg *config.Config) error {
	var err error
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) {
		set[canonical(fl.Name)] = true
		switch canonical(fl.Name) {
		case "m": // command-line paths are relative to the working directory, not the config
			cfg.Model.Path = absPath(f.modelPath)
		case "draft":
			cfg.Draft.Path = absPath(f.draftPath)
		case "n":
			cfg.Sampling.NPredict = f.n
		case "ctx":
			cfg.Model.Ctx = f.ctx
		case "batch":
			cfg.Model.Batch = f.batch
		case "threads":
			cfg.Model.Threads = f.threads
		case "temp":
			cfg.Sampling.Temperature = f.temp
		case "seed":
			cfg.Sampling.Seed = f.seed
		case "top-k":
			cfg.Sampling.TopK = f.topK
		case "top-p":
			cfg.Sampling.TopP = f.topP
		case "min-p":
			cfg.Sampling.MinP = f.minP
		case "repeat-penalty", "presence-penalty", "frequency-penalty":
			switch canonical(fl.Name) {
			case "repeat-penalty":
				cfg.Sampling.RepeatPenalty = f.repeatPenalty
			case "presence-penalty":
				cfg.Sampling.PresencePenalty = f.presencePenalty
			default:
				cfg.Sampling.FrequencyPenalty = f.frequencyPenalty
			}
			if cfg.Sampling.Penalty == "" {
				cfg.Sampling.Penalty = "penalty"
			}
		case "repeat-last-n":
			cfg.Sampling.RepeatLastN = f.repeatLastN
		case "kv":
			if _, e := kv.ParseType(f.kvType); e != nil { // one message, not one per [model] and [draft]
				err = usagef("%s: --kv %s: %s", fs.Name(), f.kvType, strings.TrimPrefix(e.Error(), "kv: "))
			}
			cfg.Model.KV, cfg.Draft.KV = f.kvType, f.kvType
		case "device":
			cfg.Model.Device = f.device
		case "cpu-order":
			cfg.Model.CPUOrder = f.cpuOrder
		case "trace":
			cfg.Log.Trace = absPath(f.trace)
		case "depth":
			var d config.Depth
			if e := d.UnmarshalText([]byte(f.depth)); e != nil {
				err = usagef("%s: --depth %s: %v", fs.Name(), f.depth, e)
			}
			cfg.Spec.Depth = d
		case "draft-max":
			cfg.Spec.DraftMax = f.draftMax
		case "draft-min":
			cfg.Spec.DraftMin = f.draftMin
		case "draft-p-min":
			cfg.Spec.MinConf = f.draftPMin
		case "policy", "sampler", "penalty": // a declared name, or a source it declares
			if e := cfg.UsePlugin(sdk.Role(fl.Name), fl.Value.String()); e != nil {
				err = usagef("%s: %v", fs.Name(), e)
			}
		case "drafter":
			if e := cfg.UseDrafters(f.drafter); e != nil {
				err = usagef("%v", e)
			}
		}
	})
	if err != nil {
		return err
	}
	if set["ngl"] && f.ngl == 0 && !set["device"] { // llama.cpp's -ngl 0: no layer on the GPU
		cfg.Model.Device = config.DeviceCPU
	}
	if e := cfg.Validate(); e != nil {
		return usageError{Err: flagErrors(fs, e)}
	}
	return nil
}

// warnings prints on stderr what the flags asked for that this run ignores: the
// speculative flags with neither a draft model nor a drafter, and -ngl where it cannot
// apply.
func (f *runFlags) warnings(m *Main, fs *flag.FlagSet, cfg *config.Config, backendName string) {
	fs.Visit(func(fl *flag.Flag) {
		name := canonical(fl.Name)
		switch {
		case cfg.Draft.Path == "" && len(cfg.Spec.DrafterNames()) == 0 && (name == "depth" || name == "draft-max" || name == "draft-min" || name == "draft-p-min" || name == "policy"):
			fmt.Fprintf(m.Stderr, "warning: --%s %s is ignored without a draft model or a drafter (give --draft DRAFT.gguf or --drafter ngram)\n", fl.Name, fl.Value)
		case name == "ngl" && f.ngl != 0 && backendName == config.DeviceCPU:
			fmt.Fprintf(m.Stderr, "warning: -%s %d is ignored: this run uses the CPU backend\n", fl.Name, f.ngl)
		case name == "ngl" && f.ngl > 0 && backendName != config.DeviceCPU:
			fmt.Fprintf(m.Stderr, "warning: -%s %d is ignored: minfer runs every layer on the GPU (-ngl 0 or --device cpu runs none there)\n", fl.Name, f.ngl)
		case name == "ngld":
			fmt.Fprintf(m.Stderr, "warning: -%s %d is ignored: the draft runs on the target's device\n", fl.Name, f.ngld)
		}
	})
}

// absPath makes a command-line path absolute (config.ResolvePath would otherwise
// resolve it against the config file's directory).
func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil && p != "" {
		return a
	}
	return p
}

func runRun(ctx context.Context, m *Main, args []string) error {
	var f runFlags
	fs := m.newFlagSet("run", runUsage)
	f.define(fs)
	rest, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("run: unexpected argument %q (the prompt goes in -p)", rest[0])
	}
	if f.prompt != "" && f.file != "" {
		return usagef("run: -p and -f both given")
	}
	if f.topLogits < 0 {
		return usagef("run: --top-logits %d: want ≥ 0", f.topLogits)
	}
	if slices.Contains(f.stops, "") {
		return usagef("run: --stop \"\": an empty stop string would stop at once")
	}
	if f.topLogits > 0 && !f.jsonOut {
		return usagef("run: --top-logits needs --json (the logits are a field of its output)")
	}
	if f.system != "" || f.chatTemplate != "" {
		f.chat = true // as llama.cpp's -sys and --chat-template: they belong to a conversation
	}
	cfg, _, err := config.LoadOrDefault(f.configPath)
	if err != nil {
		return err
	}
	if err := f.apply(fs, cfg); err != nil {
		return err
	}
	prompt := f.prompt
	if f.file != "" {
		b, err := m.readInput(f.file)
		if err != nil {
			return fmt.Errorf("run: %w", err)
		}
		prompt = string(b)
		if prompt == "" && !f.chat {
			return fmt.Errorf("run: %s is empty (no prompt)", inputName(f.file))
		}
	}
	if f.escape {
		prompt = unescape(prompt)
	}
	if prompt == "" && !f.chat {
		return usagef("run: no prompt (give -p TEXT, -f FILE or --chat)")
	}
	so := m.stackOptions()
	so.Verbose, so.IgnoreEOS = true, f.ignoreEOS // model and KV memory always go to stderr
	st, err := stack.Open(ctx, cfg, so)
	if err != nil {
		return err
	}
	defer st.Close()
	f.warnings(m, fs, cfg, st.B.Name())
	if f.chat {
		if err := st.UseChatTemplate(f.chatTemplate); err != nil {
			return err
		}
	}
	if f.chat && prompt == "" {
		return repl.Run(ctx, st, cfg, repl.Options{Stdin: m.Stdin, Stdout: m.Stdout, Stderr: m.Stderr,
			System: f.system, Stop: f.stops, TopLogits: f.topLogits, Verbose: f.verbose})
	}
	var ids []int32
	if f.chat { // the server's rendering and tokenization, so run, the REPL and the server agree
		prompt, ids, err = st.ChatPrompt(ctx, f.system, prompt)
	} else {
		ids, err = st.Tok.Encode(prompt, true, false)
	}
	if err != nil {
		return err
	}
	req, err := st.Request(ctx, cfg, ids)
	if err != nil {
		return err
	}
	defer st.CloseRequest()
	req.Stop, req.TopLogits = f.stops, f.topLogits
	echoed := false
	if !f.jsonOut {
		if !f.chat && len(ids) <= st.Sess.Ctx() { // a prompt too long for the context gets only the error
			fmt.Fprint(m.Stdout, prompt)
			echoed = true
		}
		req.OnText = func(s string) error { _, err := io.WriteString(m.Stdout, s); return err }
	}
	res, err := st.Sess.Generate(ctx, req)
	if err != nil && ctx.Err() != nil { // Ctrl-C: the user's interruption, not a failure
		err = interrupted(ctx)
		if res != nil {
			res.Stop = stopInterrupted
		}
	}
	if err != nil && res == nil {
		if echoed {
			fmt.Fprintln(m.Stdout) // end the echoed prompt, so the error starts its own line
		}
		return err
	}
	if f.jsonOut {
		if jerr := stack.WriteJSON(m.Stdout, res, st.Speculates(cfg)); jerr != nil {
			return jerr
		}
	} else {
		fmt.Fprintln(m.Stdout)
	}
	stack.PrintTimings(m.Stderr, res, f.verbose && st.Speculates(cfg))
	return err
}

// stopInterrupted is the stop reason run reports after Ctrl-C.
const stopInterrupted engine.StopReason = "interrupted"

// inputName names a file argument in messages ("-" is stdin).
func inputName(path string) string {
	if path == "-" {
		return "stdin"
	}
	return path
}

// stackOptions are the options of every stack a command opens: stderr, and the
// embedded model for a config without a model.
func (m *Main) stackOptions() stack.Options {
	return stack.Options{Log: m.Stderr, Terminal: m.StderrTerminal, Embedded: openEmbedded, EmbeddedName: embeddedName}
}
