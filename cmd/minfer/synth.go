package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/minfer/minfer/internal/inspect"
	"github.com/minfer/minfer/internal/synth"
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

Types: f32 f16 bf16 q8_0 q4_0 q4_k q6_k mxfp4 (every 2-D tensor of that type, like
llama-quantize --pure), iq4_nl, iq4_xs and iq3_s (that type, Q6_K for output, as
llama-quantize without an importance matrix), iq3_xxs iq2_s iq2_xs iq2_xxs iq1_s iq1_m
(that type, Q6_K for output; --fast only: minfer has no quantizer for them), q4_k_m
(llama-quantize's Q4_K_M mixture: Q6_K for output and for attn_v/ffn_down of some
layers) and q3_k_m (its Q3_K_M mixture: Q3_K, Q6_K for output, Q4_K for attn_output,
attn_v Q5_K in the first two layers and Q4_K after, ffn_down Q5_K in the first
sixteenth and Q4_K after). Row lengths that do not fit the type fall back as
llama-quantize does (q4_k→q5_0, q5_k→q5_1, q6_k→q8_0, q2_k, q3_k, iq4_xs and the iq
codebook types→iq4_nl, else f16). Norms and biases are F32.

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

func runSynth(ctx context.Context, m *Main, args []string) error {
	usage := strings.Replace(synthUsage, "{{PRESETS}}", strings.Join(synth.PresetNames(), ", "), 1)
	fs := m.newFlagSet("synth", usage)
	var (
		o       synth.Options
		preset  string
		out     string
		seed    uint64
		dryRun  bool
		outFlag = fs.String("o", "", "output `FILE` (required)")
	)
	fs.BoolVar(&dryRun, "dry-run", false, "print the planned tensors; write nothing")
	fs.StringVar(&o.Arch, "arch", "", "architecture: llama, qwen2 or qwen3 (implied by --preset)")
	fs.StringVar(&preset, "preset", "", "real model shapes: "+strings.Join(synth.PresetNames(), ", "))
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
	fs.StringVar(&o.Type, "type", "", "tensor type: f32 f16 bf16 q8_0 q4_0 q4_k q6_k mxfp4 iq4_nl iq4_xs iq3_s q4_k_m q3_k_m, or with --fast iq3_xxs iq2_s iq2_xs iq2_xxs iq1_s iq1_m (required)")
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
	opts, err := synth.Resolve(o, preset, set)
	if err != nil {
		return usageError{Err: err}
	}
	plan, err := synth.NewPlan(opts)
	if err != nil {
		return err
	}
	if dryRun {
		plan.WriteTable(m.Stdout)
		return nil
	}
	start := time.Now()
	var data uint64
	for _, t := range plan.Tensors {
		data += t.Bytes()
	}
	// a start line either way (a 7B takes minutes); a redrawn progress line only on a
	// terminal
	fmt.Fprintf(m.Stderr, "synth: %s %s, %d tensors, %s params; writing %s of %s to %s\n", opts.Arch, opts.Name,
		len(plan.Tensors), inspect.HumanCount(plan.Params()), inspect.HumanBytes(data), opts.Type, out)
	var progress func(done, total int64)
	if m.StderrTerminal {
		progress = func(done, total int64) {
			fmt.Fprintf(m.Stderr, "\rsynth: %3.0f%% (%s of %s)   ", 100*float64(done)/float64(max(total, 1)), inspect.HumanBytes(uint64(done)), inspect.HumanBytes(uint64(total)))
		}
	}
	n, err := synth.WriteProgress(ctx, plan, out, progress)
	if progress != nil {
		fmt.Fprint(m.Stderr, "\r\033[K")
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(m.Stderr, "synth: wrote %s (%s, %s) in %.1fs\n", out, inspect.HumanBytes(uint64(n)), opts.Type, time.Since(start).Seconds())
	return nil
}
