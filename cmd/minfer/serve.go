package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/minfer/minfer/core/config"
	"github.com/minfer/minfer/core/tokenizer"
	"github.com/minfer/minfer/internal/stack"
)

func init() {
	register(&command{name: "serve", summary: "OpenAI-compatible HTTP server (chat, completions, models, metrics)", run: runServe})
}

const serveUsage = `
Usage: minfer serve [-m MODEL] [--draft DRAFT] [--addr HOST:PORT] [flags]

Serves the OpenAI API on the model: POST /v1/chat/completions, POST /v1/completions,
GET /v1/models, GET /health, GET /metrics (Prometheus). --parallel sequences run at
once; further requests queue. A request may choose plugins declared in minfer.toml
and allowed by [server] allow_plugins through its "minfer" field:
  {"minfer": {"policy": "ucb", "sampler": "greedy", "draft_max": 4, "assert_identity": true}}
Ctrl-C (SIGINT/SIGTERM) stops accepting connections and drains requests in flight.

Examples:
  minfer serve                                   # the embedded model on 127.0.0.1:8080
  minfer serve -m qwen2.5-0.5b-q8_0.gguf --addr 0.0.0.0:8080 --parallel 8
  minfer serve -m target.gguf --draft draft.gguf --config minfer.toml
  curl -s localhost:8080/v1/chat/completions -d '{"messages":[{"role":"user","content":"Hi"}]}'
`

func runServe(ctx context.Context, m *Main, args []string) error {
	var f runFlags
	var addr, host, apiKeyEnv, alias string
	var parallel, maxTokens, port, batchRows int
	var grace time.Duration
	var batchDepth config.BatchDepth
	fs := m.newFlagSet("serve", serveUsage)
	f.defineModel(fs)
	f.defineSpec(fs)
	f.defineSampling(fs)
	fs.StringVar(&f.depth, "depth", "", "draft depth per round: N or auto (the policy plugin)")
	fs.StringVar(&f.chatTemplate, "chat-template", "", "chat template: a built-in `NAME` ("+strings.Join(tokenizer.BuiltinTemplateNames(), ", ")+") or a Jinja template FILE (default: the model's)")
	fs.StringVar(&addr, "addr", "", "listen address (default: [server] addr, 127.0.0.1:8080)")
	fs.StringVar(&host, "host", "", "listen host (llama.cpp's --host; with --port, instead of --addr)")
	fs.IntVar(&port, "port", 0, "listen port (llama.cpp's --port)")
	fs.StringVar(&alias, "alias", "", "the model id /v1/models and responses report (default: the model file's name)")
	fs.StringVar(&alias, "a", "", "alias of --alias")
	fs.IntVar(&parallel, "parallel", 0, "sequences served at once (default: [server] parallel, 4)")
	fs.IntVar(&parallel, "np", 0, "alias of --parallel")
	fs.IntVar(&batchRows, "batch-rows", 0, "most rows of one batched forward of the slots (default: [server] batch_rows, 64; 0: no batching)")
	fs.Var(&batchDepth, "batch-depth", "every round's depth while two or more slots generate: off (each policy's), `N` drafted tokens for every sequence, in lockstep, or auto (1 or 0 by the batch's size, from the models' costs measured at start) (default: [spec] batch_depth, auto)")
	fs.IntVar(&maxTokens, "max-tokens", 0, "cap on a request's max_tokens (default: [server] max_tokens)")
	fs.StringVar(&apiKeyEnv, "api-key-env", "", "environment variable holding the API key (default: [server] api_key_env)")
	fs.DurationVar(&grace, "shutdown-grace", 30*time.Second, "how long shutdown waits for requests in flight")
	fs.BoolVar(&f.verbose, "verbose", false, "log every request to stderr")
	rest, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("serve: unexpected argument %q", rest[0])
	}
	if grace < 0 {
		return usagef("serve: --shutdown-grace %v: want ≥ 0", grace)
	}
	cfg, _, err := config.LoadOrDefault(f.configPath)
	if err != nil {
		return err
	}
	if err := serveAddr(fs, cfg, addr, host, port); err != nil {
		return err
	}
	fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "parallel", "np":
			cfg.Server.Parallel = parallel
		case "batch-rows":
			cfg.Server.BatchRows = batchRows
		case "batch-depth":
			cfg.Spec.BatchDepth = batchDepth
		case "max-tokens":
			cfg.Server.MaxTokens = maxTokens
		case "api-key-env":
			cfg.Server.APIKeyEnv = apiKeyEnv
		}
	})
	if err := f.apply(fs, cfg); err != nil {
		return err
	}
	if apiKeyEnv != "" && os.Getenv(apiKeyEnv) == "" { // before the model loads; the stack names [server] api_key_env
		return fmt.Errorf("serve: --api-key-env %s: the variable is empty or unset", apiKeyEnv)
	}
	srv, st, err := stack.NewServer(ctx, cfg, stack.ServerOptions{Stack: m.stackOptions(), Verbose: f.verbose, Alias: alias, ChatTemplate: f.chatTemplate})
	if err != nil {
		return err
	}
	defer st.Close()
	defer srv.Close()
	f.warnings(m, fs, cfg, st.B.Name())
	return srv.ListenAndServe(ctx, cfg.Server.Addr, grace, func(a net.Addr) {
		batching := "each slot's forwards alone"
		if cfg.Server.BatchRows > 0 && cfg.Server.Parallel > 1 {
			batching = fmt.Sprintf("forwards batched up to %d rows", cfg.Server.BatchRows)
		}
		fmt.Fprintf(m.Stderr, "minfer: serving %s on http://%s (%d slots, %s)\n", stack.ModelID(cfg, alias, embeddedName), a, cfg.Server.Parallel, batching)
	})
}

// serveAddr sets [server] addr from --addr, or from llama.cpp's --host and --port
// (either may be given alone: the other keeps the configured address's part).
func serveAddr(fs *flag.FlagSet, cfg *config.Config, addr, host string, port int) error {
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	switch {
	case set["addr"] && (set["host"] || set["port"]):
		return usagef("serve: --addr and --host/--port both given (--addr is HOST:PORT)")
	case set["addr"]:
		cfg.Server.Addr = addr
	case set["host"] || set["port"]:
		h, p, err := net.SplitHostPort(cfg.Server.Addr)
		if err != nil {
			return fmt.Errorf("serve: [server] addr %q: %w", cfg.Server.Addr, err)
		}
		if set["host"] {
			h = host
		}
		if set["port"] {
			if port < 0 || port > 65535 {
				return usagef("serve: --port %d: want 0..65535", port)
			}
			p = strconv.Itoa(port)
		}
		cfg.Server.Addr = net.JoinHostPort(h, p)
	}
	return nil
}
