// Package synth writes synthetic GGUF models: random weights with the real shapes,
// tensor names, metadata and type mixtures of released models (llama, qwen2, qwen3), as
// llama.cpp's converter and llama-quantize would write them, so that both llama.cpp and
// minfer load them. With Init "lm" the weights carry a bigram backbone (backbone in
// lm.go) that makes the random network as confident as a trained one, so two types of
// one seed are a real speculative target/draft pair. `minfer synth` is its command line.
package synth

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// Options are the parameters of a synthetic model; Resolve fills and validates them.
type Options struct {
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

// presetSpec holds the real hyperparameters of a released model (from its config.json).
type presetSpec struct {
	opts Options
	desc string
}

var presets = map[string]presetSpec{
	"qwen2.5-0.5b": {Options{Arch: "qwen2", NEmbd: 896, NLayer: 24, NHead: 14, NHeadKV: 2, HeadDim: 64, NFF: 4864,
		NVocab: 151936, Ctx: 32768, RopeTheta: 1e6, RMSEps: 1e-6, Tied: true}, "Qwen2.5-0.5B"},
	"qwen2.5-1.5b": {Options{Arch: "qwen2", NEmbd: 1536, NLayer: 28, NHead: 12, NHeadKV: 2, HeadDim: 128, NFF: 8960,
		NVocab: 151936, Ctx: 32768, RopeTheta: 1e6, RMSEps: 1e-6, Tied: true}, "Qwen2.5-1.5B"},
	"qwen2.5-7b": {Options{Arch: "qwen2", NEmbd: 3584, NLayer: 28, NHead: 28, NHeadKV: 4, HeadDim: 128, NFF: 18944,
		NVocab: 152064, Ctx: 32768, RopeTheta: 1e6, RMSEps: 1e-6, Tied: false}, "Qwen2.5-7B"},
	"qwen2.5-14b": {Options{Arch: "qwen2", NEmbd: 5120, NLayer: 48, NHead: 40, NHeadKV: 8, HeadDim: 128, NFF: 13824,
		NVocab: 152064, Ctx: 32768, RopeTheta: 1e6, RMSEps: 1e-5, Tied: false}, "Qwen2.5-14B"},
	"qwen3-0.6b": {Options{Arch: "qwen3", NEmbd: 1024, NLayer: 28, NHead: 16, NHeadKV: 8, HeadDim: 128, NFF: 3072,
		NVocab: 151936, Ctx: 40960, RopeTheta: 1e6, RMSEps: 1e-6, Tied: true}, "Qwen3-0.6B"},
	"llama-3.2-1b": {Options{Arch: "llama", NEmbd: 2048, NLayer: 16, NHead: 32, NHeadKV: 8, HeadDim: 64, NFF: 8192,
		NVocab: 128256, Ctx: 131072, RopeTheta: 500000, RMSEps: 1e-5, Tied: true}, "Llama-3.2-1B"},
}

func PresetNames() []string {
	names := make([]string, 0, len(presets))
	for n := range presets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Resolve merges the preset named preset (if any) with o's fields that set names (by
// their command-line flag names: "n-embd", "tied", ...), fills defaults and validates.
// Errors name the flag.
func Resolve(o Options, preset string, set map[string]bool) (Options, error) {
	r := Options{Ctx: 4096}
	if preset != "" {
		p, ok := presets[strings.ToLower(preset)]
		if !ok {
			return r, fmt.Errorf("synth: unknown preset %q (have %s)", preset, strings.Join(PresetNames(), ", "))
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

func (r *Options) fillDefaults() error {
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
	if _, ok := typeTable[r.Type]; !ok {
		if r.Type == "" {
			return fmt.Errorf("synth: --type is required (%s)", strings.Join(TypeNames(), ", "))
		}
		return fmt.Errorf("synth: unknown --type %q (want %s)", r.Type, strings.Join(TypeNames(), ", "))
	}
	return nil
}

// Write writes the planned model to path (through path+".tmp", renamed when complete,
// so an interrupted write leaves no partial file). It stops with ctx's error when ctx ends.
func Write(ctx context.Context, p *Plan, path string) (int64, error) {
	return WriteProgress(ctx, p, path, nil)
}

// WriteProgress is Write that calls progress (when non-nil) as the file grows, with the
// bytes written and the size of the tensor data the plan holds (the file is that plus
// its header), at most about once per 1% of it.
func WriteProgress(ctx context.Context, p *Plan, path string, progress func(done, total int64)) (int64, error) {
	w, err := p.writer(ctx)
	if err != nil {
		return 0, err
	}
	tmp := path + ".tmp"
	fh, err := os.Create(tmp)
	if err != nil {
		return 0, fmt.Errorf("synth: %w", err)
	}
	var dst io.Writer = fh
	if progress != nil {
		var total int64
		for _, t := range p.Tensors {
			total += int64(t.Bytes())
		}
		dst = &progressWriter{w: fh, total: total, step: max(total/100, 1), report: progress}
	}
	n, err := w.WriteTo(dst)
	if pw, ok := dst.(*progressWriter); ok && err == nil {
		progress(pw.total, pw.total)
	}
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
	return n, nil
}

// progressWriter counts what passes to w and reports it every step bytes.
type progressWriter struct {
	w                 io.Writer
	done, next, total int64
	step              int64
	report            func(done, total int64)
}

func (p *progressWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	p.done += int64(n)
	if p.done >= p.next {
		p.report(min(p.done, p.total), p.total)
		p.next = p.done + p.step
	}
	return n, err
}
