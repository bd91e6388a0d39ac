package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/minfer/minfer/core/config"
	"github.com/minfer/minfer/core/engine/bench"
	"github.com/minfer/minfer/core/gguf"
	"github.com/minfer/minfer/core/kv"
	"github.com/minfer/minfer/internal/cli"
	"github.com/minfer/minfer/internal/stack"
)

func init() {
	register(&command{name: "bench", summary: "prompt-processing and generation speed (llama-bench's pp/tg tests)", run: runBench})
}

const benchUsage = `
Usage: minfer bench [-m MODEL] [-p 512[,N...]] [-n 128[,N...]] [-d 0[,N...]] [-r 5] [-t THREADS] [--json]

Measures what llama-bench measures: ppN processes N random tokens as one prompt
(forwards of --batch tokens) and tgN generates N tokens one at a time, each repetition
from a fresh KV cache, after one warm-up run. Prints mean ± standard deviation of
tokens per second over the repetitions, as a table or JSON. -p and -n take a
comma-separated list (or repeat), one test per value, as llama-bench's do; -p 0 or
-n 0 skips that test. -d (--n-depth) runs every test at each depth: that many random
tokens are put in the cache first (untimed, in forwards of --batch tokens), so
"pp16 @ d2048" is the cost of a 16-row forward at a 2,048-token context.

--device picks the backend (auto: CUDA when a usable GPU is present, else the CPU).
--ledger (CUDA) runs the forwards in profiling mode — graphs off, CUDA events around
every kernel — and prints a per-kernel ledger: ms per kernel kind and its share of the
forward, so a shape's cost can be attributed to kernels. A row marked † is a library call
(cuBLAS): its time also holds the host's work inside the call.

Examples:
  minfer bench -m qwen2.5-0.5b-q8_0.gguf
  minfer bench -m model.gguf -p 64 -n 16 -t 2 -r 3 --json
  minfer bench -m model.gguf -p 64,128,512 -n 0
  minfer bench -m qwen2.5-7b-q4_k_m.gguf --device cuda -p 512 -n 128 -r 5
  minfer bench -m qwen2.5-7b-q4_k_m.gguf --device cuda -p 8 -n 0 -r 3 --ledger
  minfer bench -m qwen2.5-7b-q4_k_m.gguf --device cuda -p 16 -n 0 -d 0,2048 --ledger
`

func runBench(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("bench", benchUsage+cudaSwitchHelp())
	var (
		configPath, modelPath, kvName, device, cpuOrder string
		reps, threads, batch, ngl                       int
		jsonOut, ledger                                 bool
		nps, ngs, nds                                   = intList{Vals: []int{512}}, intList{Vals: []int{128}}, intList{Vals: []int{0}}
	)
	fs.StringVar(&device, "device", "", "backend: auto, cpu or cuda (default: [model] device)")
	fs.StringVar(&cpuOrder, "cpu-order", "", "llama.cpp CPU build whose rounding the CPU backend reproduces: avx512 or avx2 (default: [model] cpu_order)")
	fs.BoolVar(&ledger, "ledger", false, "CUDA profiling mode: print a per-kernel time ledger")
	fs.StringVar(&configPath, "config", "", "minfer.toml to read")
	fs.StringVar(&modelPath, "m", "", "model GGUF file (default: [model] path, else the embedded model)")
	fs.Var(&nps, "p", "prompt tokens of the pp tests, comma-separated `N,...` (0: skip)")
	fs.Var(&ngs, "n", "generated tokens of the tg tests, comma-separated `N,...` (0: skip)")
	fs.Var(&nds, "d", "context depths: tokens in the cache before each test, comma-separated `N,...`")
	fs.Var(&nds, "n-depth", "alias of -d")
	fs.IntVar(&ngl, "ngl", -1, "llama-bench's GPU layers: 0 means --device cpu, other values are ignored (every layer runs on one device)")
	fs.IntVar(&ngl, "n-gpu-layers", -1, "alias of -ngl")
	fs.IntVar(&reps, "r", 5, "repetitions")
	fs.IntVar(&threads, "threads", 0, "CPU threads (0: physical cores)")
	fs.IntVar(&threads, "t", 0, "alias of --threads")
	fs.IntVar(&batch, "batch", 512, "tokens per forward in the pp test")
	fs.IntVar(&batch, "b", 512, "alias of --batch")
	fs.StringVar(&kvName, "kv", "f16", "KV cache type: f16 or q8_0")
	fs.BoolVar(&jsonOut, "json", false, "print a JSON array of results")
	rest, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(rest) > 0:
		return usagef("bench: unexpected argument %q", rest[0])
	case slices.Min(nps.Vals) < 0 || slices.Min(ngs.Vals) < 0 || slices.Max(nps.Vals)+slices.Max(ngs.Vals) == 0:
		return usagef("bench: -p %s -n %s: want counts ≥ 0, not all 0", &nps, &ngs)
	case slices.Min(nds.Vals) < 0:
		return usagef("bench: -d %s: want depths ≥ 0", &nds)
	case threads < 0:
		return usagef("bench: --threads %d: want ≥ 0 (0: physical cores)", threads)
	}
	if err := atLeastOne(fs, "r", "batch", "b"); err != nil {
		return err
	}
	kt, err := kv.ParseType(kvName)
	if err != nil {
		return usagef("bench: --kv %s: %s", kvName, strings.TrimPrefix(err.Error(), "kv: "))
	}
	cfg, _, err := config.LoadOrDefault(configPath)
	if err != nil {
		return err
	}
	if modelPath != "" {
		cfg.Model.Path = absPath(modelPath)
	}
	cfg.Model.Threads = threads
	if ngl == 0 && device == "" {
		device = config.DeviceCPU
	}
	if err := setCPUOrder(cfg, cpuOrder); err != nil {
		return err
	}
	if err := setDevice(cfg, device); err != nil {
		return err
	}
	if ledger {
		os.Setenv("MINFER_LEDGER", "1")
	}
	b, err := stack.NewBackend(cfg)
	if err != nil {
		return err
	}
	defer b.Close()
	led, hasLedger := b.(interface{ WriteLedger(io.Writer) })
	if ledger && !hasLedger {
		return usagef("bench: --ledger needs the CUDA backend (--device cuda); this run uses %s", b.Name())
	}
	path := cfg.ResolvePath(cfg.Model.Path)
	md, f, err := stack.LoadModel(b, path, "target", m.stackOptions())
	if err != nil {
		return err
	}
	defer md.Close()
	if ngl > 0 || ngl == 0 && b.Name() != config.DeviceCPU {
		fmt.Fprintf(m.Stderr, "warning: -ngl %d is ignored: every layer runs on the %s backend\n", ngl, b.Name())
	}
	cache, err := md.NewKV(slices.Max(nds.Vals)+max(slices.Max(nps.Vals), slices.Max(ngs.Vals)), kt)
	if err != nil {
		return err
	}
	defer cache.Close()
	base := bench.Result{Model: filepath.Base(path), SizeBytes: md.WeightBytes, Params: bench.ParamCount(md), KV: kt.String(), Threads: threads}
	if path == "" {
		base.Model = embeddedName
	}
	base.Type = "-"
	if ft, err := f.GetUint("general.file_type"); err == nil {
		base.Type = fileTypeName(ft)
	}
	if base.Threads == 0 {
		base.Threads = cpuThreads(b)
	}
	on := b.Name()
	if bl, ok := b.(interface{ BLAS() (bool, string) }); ok { // CUDA: which prefill GEMM runs
		if yes, ver := bl.BLAS(); yes {
			on += " (prefill GEMM: cuBLAS " + ver + ")"
		} else {
			on += " (prefill GEMM: minfer's kernel, no cuBLAS)"
		}
	}
	fmt.Fprintf(m.Stderr, "bench: %s on %s, %d repetitions after a warm-up\n", base.Model, on, reps)
	results, err := bench.Suite(ctx, b, md, cache, bench.SuiteOptions{Prompt: nps.Vals, Gen: ngs.Vals, Depth: nds.Vals, Batch: batch, Reps: reps, Base: base})
	if err != nil {
		return err
	}
	if ledger {
		led.WriteLedger(m.Stderr)
	}
	if jsonOut {
		return json.NewEncoder(m.Stdout).Encode(results)
	}
	bench.WriteTable(m.Stdout, results, b.Name())
	return nil
}

type intList = cli.IntList

// fileTypeName names a general.file_type value as llama-quantize does.
func fileTypeName(ft uint64) string {
	if n, ok := gguf.FileTypeName(ft); ok {
		return n
	}
	return fmt.Sprintf("ftype %d", ft)
}

// cpuThreads reports the thread count of a CPU backend.
func cpuThreads(b any) int {
	if t, ok := b.(interface{ Threads() int }); ok {
		return t.Threads()
	}
	return 0
}
