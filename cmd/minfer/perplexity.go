package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/minfer/minfer/core/config"
	"github.com/minfer/minfer/core/engine"
	"github.com/minfer/minfer/core/kv"
	"github.com/minfer/minfer/core/tokenizer"
	"github.com/minfer/minfer/internal/stack"
)

func init() {
	register(&command{name: "perplexity", summary: "perplexity of a model on a text, as llama-perplexity computes it", run: runPerplexity})
}

const perplexityUsage = `
Usage: minfer perplexity [-m MODEL] -f TEXT [--ctx N] [--chunks N] [--batch N] [--json]

Computes perplexity exactly as llama.cpp's llama-perplexity does: the text is tokenized
(with BOS when the model adds one), cut into non-overlapping chunks of --ctx tokens, each
chunk is run from an empty cache with its first token replaced by BOS, and the second
half of each chunk is scored. Prints the running value after each chunk, then the final
estimate with its ± uncertainty. The text needs at least 2 × ctx tokens.

Examples:
  minfer perplexity -m model.gguf -f wiki.test.raw
  minfer perplexity -m model.gguf -f ppl.txt --ctx 128 --chunks 4 --json
`

func runPerplexity(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("perplexity", perplexityUsage)
	var (
		configPath, modelPath, file, kvName string
		device, cpuOrder                    string
		nctx, chunks, batch, threads        int
		jsonOut                             bool
	)
	fs.StringVar(&configPath, "config", "", "minfer.toml to read")
	fs.StringVar(&modelPath, "m", "", "model GGUF file (default: [model] path, else the embedded model)")
	fs.StringVar(&file, "f", "", "text `FILE` to score")
	fs.IntVar(&nctx, "ctx", 512, "tokens per chunk")
	fs.IntVar(&nctx, "c", 512, "alias of --ctx")
	fs.IntVar(&chunks, "chunks", -1, "most chunks to score (-1: all)")
	fs.IntVar(&batch, "batch", 2048, "tokens per forward (at most --ctx)")
	fs.IntVar(&batch, "b", 2048, "alias of --batch")
	fs.IntVar(&threads, "threads", 0, "CPU threads (0: physical cores)")
	fs.IntVar(&threads, "t", 0, "alias of --threads")
	fs.StringVar(&kvName, "kv", "f16", "KV cache type: f16 or q8_0")
	fs.StringVar(&device, "device", "", "backend: auto, cpu or cuda (default: [model] device, auto)")
	fs.StringVar(&cpuOrder, "cpu-order", "", "llama.cpp CPU build whose rounding the CPU backend reproduces: avx512 or avx2 (default: [model] cpu_order)")
	fs.BoolVar(&jsonOut, "json", false, "print {ppl_running, ppl_final, n_chunks, scored_tokens} as JSON")
	rest, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(rest) > 0:
		return usagef("perplexity: unexpected argument %q", rest[0])
	case file == "":
		return usagef("perplexity: no text (give -f FILE)")
	case nctx < 4:
		return usagef("perplexity: --ctx %d too small", nctx)
	case chunks == 0 || chunks < -1:
		return usagef("perplexity: --chunks %d: want -1 (all) or ≥ 1", chunks)
	case threads < 0:
		return usagef("perplexity: --threads %d: want ≥ 0 (0: physical cores)", threads)
	}
	if err := atLeastOne(fs, "batch", "b"); err != nil {
		return err
	}
	kt, err := kv.ParseType(kvName)
	if err != nil {
		return usagef("perplexity: --kv %s: %s", kvName, strings.TrimPrefix(err.Error(), "kv: "))
	}
	cfg, _, err := config.LoadOrDefault(configPath)
	if err != nil {
		return err
	}
	if modelPath != "" {
		cfg.Model.Path = absPath(modelPath)
	}
	if threads > 0 {
		cfg.Model.Threads = threads
	}
	if err := setCPUOrder(cfg, cpuOrder); err != nil {
		return err
	}
	if err := setDevice(cfg, device); err != nil {
		return err
	}
	text, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("perplexity: %w", err)
	}
	b, err := stack.NewBackend(cfg)
	if err != nil {
		return err
	}
	defer b.Close()
	md, f, err := stack.LoadModel(b, cfg.ResolvePath(cfg.Model.Path), "target", m.stackOptions())
	if err != nil {
		return err
	}
	defer md.Close()
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		return fmt.Errorf("%s: %w", cfg.ResolvePath(cfg.Model.Path), err)
	}
	ids, err := tok.Encode(string(text), true, false)
	if err != nil {
		return err
	}
	bos := int32(-1)
	if tok.AddBOS() {
		bos = tok.BOS()
	}
	if !jsonOut {
		fmt.Fprintf(m.Stderr, "perplexity: %d tokens, %d per chunk, batch %d\n", len(ids), nctx, min(batch, nctx))
	}
	res, err := engine.Perplexity(ctx, md, ids, engine.PerplexityOptions{Ctx: nctx, Batch: batch, Chunks: chunks,
		BOS: bos, KVType: kt, OnChunk: func(k int, ppl float64) {
			if !jsonOut {
				fmt.Fprintf(m.Stdout, "[%d]%.4f,", k+1, ppl)
			}
		}})
	if err != nil {
		return err
	}
	if jsonOut {
		return json.NewEncoder(m.Stdout).Encode(res)
	}
	fmt.Fprintf(m.Stdout, "\nFinal estimate: PPL = %.4f +/- %.5f\n", res.Final, res.PlusMinus)
	return nil
}
