package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

func init() {
	register(&command{
		name:    "synth",
		summary: "write a synthetic random-weight model (llama, qwen2, qwen3) as GGUF",
		run:     runSynth,
	})
}

const synthUsage = `
Usage: minfer synth --arch ARCH (--preset NAME | SHAPE FLAGS) --type TYPE [--vocab FILE]
                    [--seed N] [--init lm|gaussian] [--fast] [--tied] (-o OUT.gguf | --dry-run)

Writes a model with random weights and real shapes, tensor names and metadata as
llama.cpp's converter and llama-quantize would write them, so llama.cpp and minfer load it.

Weights are drawn per tensor from normal distributions by a generator seeded with
(--seed, tensor name), in float32, then converted to --type: the same --seed gives the
same float weights whatever the type. --init lm (the default) gives the random network
a bigram backbone (each ordinary token has a successor that the last layer's
feed-forward predicts with a wide logit margin; the other layers add context), so the
model is confident the way a trained one is and a quantized copy agrees with the
original on most tokens: a Q4_0 or Q4_K_M draft of an F16 target of one seed is a real
speculative pair (Qwen2.5-0.5B: 96% of Q4_0 drafts accepted). --init gaussian draws
every tensor from plain normal distributions scaled so the logits have std ≈ 3, as the
synthetic test models are made; their greedy token is fragile (a Q4_0 copy agrees on
16-60%). --fast skips the float weights of quantized tensors and writes random but
valid blocks directly (a 7B Q4_K_M in seconds, for speed benchmarks only); float types
are unaffected.

Types: f32 f16 bf16 q8_0 q4_0 q4_k q6_k (every 2-D tensor of that type, like
llama-quantize --pure) and q4_k_m (llama-quantize's Q4_K_M mixture: Q6_K for output and
for attn_v/ffn_down of some layers). Row lengths that do not fit the type fall back as
llama-quantize does (q4_k→q5_0, q6_k→q8_0, else f16). Norms and biases are F32.

Presets (--preset): ` + "{{PRESETS}}" + `
Shape flags override a preset's values one by one.

Vocabulary (--vocab): a GGUF (all tokenizer.* keys are copied) or a Hugging Face
tokenizer.json (tokenizer_config.json beside it is read for bos/eos/pad and the chat
template). Without --vocab a byte-level BPE vocabulary of n_vocab tokens is generated.
A vocabulary smaller than n_vocab is padded with [PAD] tokens; a larger one raises
n_vocab to its size, unless --n-vocab was given (then it is an error).

--dry-run prints the planned tensors (name, type, shape, bytes) and writes nothing.

Examples:
  minfer synth --preset qwen2.5-0.5b --type q8_0 -o qwen-0.5b-q8_0.gguf
  minfer synth --preset qwen2.5-14b --type q4_k_m --dry-run
  minfer synth --preset qwen2.5-7b --type q4_k_m --fast -o qwen-7b-q4_k_m.gguf
  minfer synth --preset qwen2.5-0.5b --type f16 --vocab hf/qwen3/tokenizer.json --seed 7 -o target.gguf
  minfer synth --preset qwen2.5-0.5b --type q4_k_m --vocab hf/qwen3/tokenizer.json --seed 7 -o draft.gguf
  minfer synth --arch llama --n-embd 256 --n-layer 2 --n-head 8 --n-head-kv 4 --n-ff 768 \
      --n-vocab 2048 --type q4_0 -o tiny.gguf
`

// synthOptions are the resolved parameters of a synthetic model.
type synthOptions struct {
	Arch      string // llama, qwen2, qwen3
	Name      string // general.name
	NEmbd     int
	NLayer    int
	NHead     int
	NHeadKV   int
	HeadDim   int
	NFF       int
	NVocab    int
	Ctx       int
	RopeTheta float64
	RMSEps    float64
	Tied      bool
	Type      string // f32 … q4_k_m
	Vocab     string // file, or "" for the generated vocabulary
	Seed      uint64
	Fast      bool
	Init      string // lm (default) or gaussian

	nVocabExplicit bool // --n-vocab was given: a larger vocabulary is an error
}

// synthPreset holds the real hyperparameters of a released model (from its config.json).
type synthPreset struct {
	opts synthOptions
	desc string
}

var synthPresets = map[string]synthPreset{
	"qwen2.5-0.5b": {synthOptions{Arch: "qwen2", NEmbd: 896, NLayer: 24, NHead: 14, NHeadKV: 2, HeadDim: 64, NFF: 4864,
		NVocab: 151936, Ctx: 32768, RopeTheta: 1e6, RMSEps: 1e-6, Tied: true}, "Qwen2.5-0.5B"},
	"qwen2.5-1.5b": {synthOptions{Arch: "qwen2", NEmbd: 1536, NLayer: 28, NHead: 12, NHeadKV: 2, HeadDim: 128, NFF: 8960,
		NVocab: 151936, Ctx: 32768, RopeTheta: 1e6, RMSEps: 1e-6, Tied: true}, "Qwen2.5-1.5B"},
	"qwen2.5-7b": {synthOptions{Arch: "qwen2", NEmbd: 3584, NLayer: 28, NHead: 28, NHeadKV: 4, HeadDim: 128, NFF: 18944,
		NVocab: 152064, Ctx: 32768, RopeTheta: 1e6, RMSEps: 1e-6, Tied: false}, "Qwen2.5-7B"},
	"qwen2.5-14b": {synthOptions{Arch: "qwen2", NEmbd: 5120, NLayer: 48, NHead: 40, NHeadKV: 8, HeadDim: 128, NFF: 13824,
		NVocab: 152064, Ctx: 32768, RopeTheta: 1e6, RMSEps: 1e-5, Tied: false}, "Qwen2.5-14B"},
	"qwen3-0.6b": {synthOptions{Arch: "qwen3", NEmbd: 1024, NLayer: 28, NHead: 16, NHeadKV: 8, HeadDim: 128, NFF: 3072,
		NVocab: 151936, Ctx: 40960, RopeTheta: 1e6, RMSEps: 1e-6, Tied: true}, "Qwen3-0.6B"},
	"llama-3.2-1b": {synthOptions{Arch: "llama", NEmbd: 2048, NLayer: 16, NHead: 32, NHeadKV: 8, HeadDim: 64, NFF: 8192,
		NVocab: 128256, Ctx: 131072, RopeTheta: 500000, RMSEps: 1e-5, Tied: true}, "Llama-3.2-1B"},
}

func presetNames() []string {
	names := make([]string, 0, len(synthPresets))
	for n := range synthPresets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func runSynth(ctx context.Context, m *Main, args []string) error {
	usage := strings.Replace(synthUsage, "{{PRESETS}}", strings.Join(presetNames(), ", "), 1)
	fs := m.newFlagSet("synth", usage)
	var (
		o       synthOptions
		preset  string
		out     string
		seed    uint64
		dryRun  bool
		outFlag = fs.String("o", "", "output `FILE` (required)")
	)
	fs.BoolVar(&dryRun, "dry-run", false, "print the planned tensors; write nothing")
	fs.StringVar(&o.Arch, "arch", "", "architecture: llama, qwen2 or qwen3 (implied by --preset)")
	fs.StringVar(&preset, "preset", "", "real model shapes: "+strings.Join(presetNames(), ", "))
	fs.StringVar(&o.Name, "name", "", "general.name (default: from the preset or synth-ARCH)")
	fs.IntVar(&o.NEmbd, "n-embd", 0, "embedding length")
	fs.IntVar(&o.NLayer, "n-layer", 0, "number of blocks")
	fs.IntVar(&o.NHead, "n-head", 0, "attention heads")
	fs.IntVar(&o.NHeadKV, "n-head-kv", 0, "key/value heads (default n-head)")
	fs.IntVar(&o.HeadDim, "head-dim", 0, "head dimension (default n-embd/n-head)")
	fs.IntVar(&o.NFF, "n-ff", 0, "feed-forward length")
	fs.IntVar(&o.NVocab, "n-vocab", 0, "vocabulary size (default: the vocabulary's)")
	fs.IntVar(&o.Ctx, "ctx", 0, "context length metadata (default 4096)")
	fs.Float64Var(&o.RopeTheta, "rope-theta", 0, "RoPE base (default 10000 llama, 1e6 qwen)")
	fs.Float64Var(&o.RMSEps, "rms-eps", 0, "RMS norm epsilon (default 1e-5 llama, 1e-6 qwen)")
	fs.BoolVar(&o.Tied, "tied", false, "tie the output to token_embd (no output.weight)")
	fs.StringVar(&o.Type, "type", "", "tensor type: f32 f16 bf16 q8_0 q4_0 q4_k q6_k q4_k_m (required)")
	fs.StringVar(&o.Vocab, "vocab", "", "vocabulary source: a .gguf or a tokenizer.json")
	fs.Uint64Var(&seed, "seed", 1, "weight seed")
	fs.BoolVar(&o.Fast, "fast", false, "write random valid blocks directly (fast; for benchmarks)")
	fs.StringVar(&o.Init, "init", "lm", "weight structure: lm (a bigram backbone with a trained model's margins) or gaussian")
	fs.StringVar(&out, "out", "", "same as -o")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("synth: unexpected argument %q", pos[0])
	}
	o.Seed = seed
	if out == "" {
		out = *outFlag
	}
	if out == "" && !dryRun {
		return usagef("synth: -o OUT.gguf is required")
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	opts, err := resolveSynthOptions(o, preset, set)
	if err != nil {
		return usageError{err}
	}
	if dryRun {
		plan, err := planSynth(opts)
		if err != nil {
			return err
		}
		plan.print(m.Stdout)
		return nil
	}
	start := time.Now()
	n, err := writeSynth(ctx, opts, out, m.Stderr)
	if err != nil {
		return err
	}
	fmt.Fprintf(m.Stderr, "synth: wrote %s (%s, %s) in %.1fs\n", out, humanBytes(uint64(n)), opts.Type, time.Since(start).Seconds())
	return nil
}

// resolveSynthOptions merges a preset with the flags given (set names them), fills
// defaults and validates.
func resolveSynthOptions(o synthOptions, preset string, set map[string]bool) (synthOptions, error) {
	r := synthOptions{Ctx: 4096}
	if preset != "" {
		p, ok := synthPresets[strings.ToLower(preset)]
		if !ok {
			return r, fmt.Errorf("synth: unknown preset %q (have %s)", preset, strings.Join(presetNames(), ", "))
		}
		r = p.opts
		r.Name = p.desc + "-synth"
		if set["arch"] && o.Arch != r.Arch {
			return r, fmt.Errorf("synth: --arch %s contradicts preset %s (arch %s)", o.Arch, preset, r.Arch)
		}
	}
	override := func(name string, dst *int, v int) {
		if set[name] {
			*dst = v
		}
	}
	if set["arch"] {
		r.Arch = o.Arch
	}
	override("n-embd", &r.NEmbd, o.NEmbd)
	override("n-layer", &r.NLayer, o.NLayer)
	override("n-head", &r.NHead, o.NHead)
	override("n-head-kv", &r.NHeadKV, o.NHeadKV)
	override("head-dim", &r.HeadDim, o.HeadDim)
	override("n-ff", &r.NFF, o.NFF)
	override("n-vocab", &r.NVocab, o.NVocab)
	override("ctx", &r.Ctx, o.Ctx)
	if set["rope-theta"] {
		r.RopeTheta = o.RopeTheta
	}
	if set["rms-eps"] {
		r.RMSEps = o.RMSEps
	}
	if set["tied"] {
		r.Tied = o.Tied
	}
	if set["name"] {
		r.Name = o.Name
	}
	r.Type, r.Vocab, r.Seed, r.Fast, r.Init = strings.ToLower(o.Type), o.Vocab, o.Seed, o.Fast, strings.ToLower(o.Init)
	r.nVocabExplicit = set["n-vocab"]
	return r, r.fillDefaults()
}

func (r *synthOptions) fillDefaults() error {
	switch r.Arch {
	case "llama", "qwen2", "qwen3":
	case "":
		return fmt.Errorf("synth: --arch (llama, qwen2, qwen3) or --preset is required")
	default:
		return fmt.Errorf("synth: unknown --arch %q (want llama, qwen2 or qwen3)", r.Arch)
	}
	if r.Name == "" {
		r.Name = "synth-" + r.Arch
	}
	if r.NHeadKV == 0 {
		r.NHeadKV = r.NHead
	}
	if r.HeadDim == 0 && r.NHead > 0 {
		r.HeadDim = r.NEmbd / r.NHead
	}
	if r.RopeTheta == 0 {
		r.RopeTheta = map[string]float64{"llama": 10000, "qwen2": 1e6, "qwen3": 1e6}[r.Arch]
	}
	if r.RMSEps == 0 {
		r.RMSEps = map[string]float64{"llama": 1e-5, "qwen2": 1e-6, "qwen3": 1e-6}[r.Arch]
	}
	for _, c := range []struct {
		name string
		v    int
	}{{"--n-embd", r.NEmbd}, {"--n-layer", r.NLayer}, {"--n-head", r.NHead}, {"--n-head-kv", r.NHeadKV},
		{"--head-dim", r.HeadDim}, {"--n-ff", r.NFF}, {"--ctx", r.Ctx}} {
		if c.v <= 0 {
			return fmt.Errorf("synth: %s must be > 0 (got %d); give it or use --preset", c.name, c.v)
		}
	}
	if r.NVocab < 0 || (r.NVocab == 0 && r.Vocab == "") {
		return fmt.Errorf("synth: --n-vocab must be > 0 without --vocab")
	}
	if r.NHead%r.NHeadKV != 0 {
		return fmt.Errorf("synth: --n-head %d is not a multiple of --n-head-kv %d", r.NHead, r.NHeadKV)
	}
	if r.HeadDim%2 != 0 {
		return fmt.Errorf("synth: --head-dim %d must be even (RoPE rotates pairs)", r.HeadDim)
	}
	if r.NEmbd > 1<<20 || r.NFF > 1<<22 || r.NLayer > 1024 || r.NHead*r.HeadDim > 1<<20 || r.NVocab > 1<<22 {
		return fmt.Errorf("synth: shape too large (n_embd %d, n_ff %d, layers %d, heads×dim %d, vocab %d)",
			r.NEmbd, r.NFF, r.NLayer, r.NHead*r.HeadDim, r.NVocab)
	}
	if r.RMSEps <= 0 || r.RopeTheta <= 0 {
		return fmt.Errorf("synth: --rms-eps and --rope-theta must be > 0")
	}
	switch r.Init {
	case "":
		r.Init = "lm"
	case "lm", "gaussian":
	default:
		return fmt.Errorf("synth: unknown --init %q (want lm or gaussian)", r.Init)
	}
	if _, ok := synthTypes[r.Type]; !ok {
		if r.Type == "" {
			return fmt.Errorf("synth: --type is required (%s)", strings.Join(synthTypeNames(), ", "))
		}
		return fmt.Errorf("synth: unknown --type %q (want %s)", r.Type, strings.Join(synthTypeNames(), ", "))
	}
	return nil
}

// writeSynth plans and writes the model to path; progress goes to log.
func writeSynth(ctx context.Context, o synthOptions, path string, log io.Writer) (int64, error) {
	plan, err := planSynth(o)
	if err != nil {
		return 0, err
	}
	w, err := plan.writer(ctx)
	if err != nil {
		return 0, err
	}
	tmp := path + ".tmp"
	fh, err := os.Create(tmp)
	if err != nil {
		return 0, fmt.Errorf("synth: %w", err)
	}
	n, err := w.WriteTo(fh)
	if cerr := fh.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return 0, fmt.Errorf("synth: %s: %w", path, err)
	}
	fmt.Fprintf(log, "synth: %s %s, %d tensors, %s params\n", o.Arch, o.Name, len(plan.Tensors), humanCount(plan.params()))
	return n, nil
}

// print writes the plan as a table: name, type, shape, bytes, then totals.
func (p *synthPlan) print(w io.Writer) {
	o := p.Opts
	fmt.Fprintf(w, "%s %s: n_embd %d, %d layers, %d/%d heads of %d, n_ff %d, n_vocab %d, ctx %d, tied %v, type %s\n",
		o.Arch, o.Name, o.NEmbd, o.NLayer, o.NHead, o.NHeadKV, o.HeadDim, o.NFF, o.NVocab, o.Ctx, o.Tied, o.Type)
	nameW := 0
	for _, t := range p.Tensors {
		nameW = max(nameW, len(t.Name))
	}
	var total uint64
	for _, t := range p.Tensors {
		size := p.tensorBytes(t)
		total += size
		fmt.Fprintf(w, "  %-*s  %-5s  %-16s  %12d\n", nameW, t.Name, t.Type, shapeString(t.Dims), size)
	}
	fmt.Fprintf(w, "%d tensors, %s params, %s of tensor data, %d metadata keys\n",
		len(p.Tensors), humanCount(p.params()), humanBytes(total), len(p.KVs))
}

func (p *synthPlan) tensorBytes(t plannedTensor) uint64 {
	rows := uint64(1)
	for _, d := range t.Dims[1:] {
		rows *= d
	}
	rb, _ := t.Type.RowBytes(int(t.Dims[0]))
	return rows * uint64(rb)
}
