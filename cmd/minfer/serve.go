package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/minfer/minfer/core/config"
	"github.com/minfer/minfer/core/engine"
	"github.com/minfer/minfer/core/server"
	"github.com/minfer/minfer/core/tokenizer"
	"github.com/minfer/minfer/sdk"
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
		case "max-tokens":
			cfg.Server.MaxTokens = maxTokens
		case "api-key-env":
			cfg.Server.APIKeyEnv = apiKeyEnv
		}
	})
	if err := f.apply(fs, cfg); err != nil {
		return err
	}
	srv, st, err := m.newServer(ctx, cfg, serveOptions{verbose: f.verbose, alias: alias, chatTemplate: f.chatTemplate})
	if err != nil {
		return err
	}
	defer st.close()
	defer srv.Close()
	f.warnings(m, fs, cfg, st.b.Name())
	return srv.ListenAndServe(ctx, cfg.Server.Addr, grace, func(a net.Addr) {
		batching := "each slot's forwards alone"
		if cfg.Server.BatchRows > 0 && cfg.Server.Parallel > 1 {
			batching = fmt.Sprintf("forwards batched up to %d rows", cfg.Server.BatchRows)
		}
		fmt.Fprintf(m.Stderr, "minfer: serving %s on http://%s (%d slots, %s)\n", serveModelID(cfg, alias), a, cfg.Server.Parallel, batching)
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

// serveOptions are newServer's options.
type serveOptions struct {
	verbose      bool   // log every request
	alias        string // the model id reported ("" = the model file's name)
	chatTemplate string // --chat-template ("" = the model's, else chatml)
}

// queueSize maps [server] queue to server.Options.QueueSize: 0 in the config means
// that no request waits (server.Options spells that as a negative size).
func queueSize(q int) int {
	if q == 0 {
		return -1
	}
	return q
}

// newServer loads the models and plugins of cfg and makes the API server with its slots.
func (m *Main) newServer(ctx context.Context, cfg *config.Config, o serveOptions) (*server.Server, *stack, error) {
	verbose := o.verbose
	so := stackOptions{verbose: true} // the model and the KV memory, at start
	if cfg.Server.BatchRows > 0 && cfg.Server.Parallel > 1 {
		so.batching = engine.NewBatching(cfg.Server.BatchRows)
	}
	st, err := m.openStack(ctx, cfg, so)
	if err != nil {
		return nil, nil, err
	}
	if err := st.useChatTemplate(m, o.chatTemplate); err != nil {
		st.close()
		return nil, nil, err
	}
	if n := cfg.Server.Parallel; n > 1 { // a session, and its caches, per slot
		fmt.Fprintf(m.Stderr, "kv cache: %d slots × %.1f MiB = %.1f MiB\n", n, float64(st.kvBytes())/(1<<20), float64(n)*float64(st.kvBytes())/(1<<20))
	}
	apiKey := ""
	if cfg.Server.APIKeyEnv != "" {
		if apiKey = os.Getenv(cfg.Server.APIKeyEnv); apiKey == "" {
			st.close()
			return nil, nil, fmt.Errorf("serve: [server] api_key_env names %s, which is empty or unset", cfg.Server.APIKeyEnv)
		}
	}
	logw := m.Stderr
	if !verbose {
		logw = nil
	}

	srv, err := server.New(server.Options{
		ModelID:   serveModelID(cfg, o.alias),
		Tokenizer: st.tok, ChatTemplate: st.chatTemplate,
		NewSession: func() (*engine.Session, error) {
			if s := st.sess; s != nil { // the stack's own session becomes the first slot
				st.sess = nil
				return s, nil
			}
			return engine.NewSession(st.sessCfg)
		},
		Parallel: cfg.Server.Parallel, QueueSize: queueSize(cfg.Server.Queue),
		Resolver:  &serveResolver{st: st, cfg: cfg},
		MaxTokens: cfg.Server.MaxTokens, APIKey: apiKey, Log: logw,
		ReadTimeout: cfg.Server.ReadTimeout, WriteTimeout: cfg.Server.WriteTimeout, IdleTimeout: cfg.Server.IdleTimeout,
		ReadHeaderTimeout: cfg.Server.ReadHeaderTimeout, SendTimeout: cfg.Server.SendTimeout, MaxConns: cfg.Server.MaxConns,
	})
	if err != nil {
		st.close()
		return nil, nil, err
	}
	if so.batching != nil {
		so.batching.Observe(srv.ObserveForward)
	}
	return srv, st, nil
}

// serveResolver turns a request's sampling parameters and plugin choices into plugin
// instances: the config's defaults, overridden by what the request sets.
type serveResolver struct {
	st  *stack
	cfg *config.Config
}

func (r *serveResolver) Resolve(ctx context.Context, p server.Params, hasDraft bool) (*server.Plugins, error) {
	c := *r.cfg
	s := &c.Sampling
	for _, ch := range []struct {
		role  sdk.Role
		name  string
		field string
		dst   *string
	}{
		{sdk.RolePolicy, p.Policy, "minfer.policy", &c.Spec.Policy},
		{sdk.RoleSampler, p.Sampler, "minfer.sampler", &s.Sampler},
		{sdk.RolePenalty, p.Penalty, "minfer.penalty", &s.Penalty},
	} {
		if ch.name == "" {
			continue
		}
		if err := r.cfg.CheckRequestPlugin(ch.role, ch.name); err != nil {
			return nil, &server.RequestError{Param: ch.field, Message: err.Error()}
		}
		*ch.dst = ch.name
	}
	setF := func(dst *float64, v *float64) {
		if v != nil {
			*dst = *v
		}
	}
	setF(&s.Temperature, p.Temperature)
	setF(&s.TopP, p.TopP)
	setF(&s.MinP, p.MinP)
	if p.TopK != nil {
		s.TopK = *p.TopK
	}
	if p.Seed != nil {
		s.Seed = *p.Seed
	}
	if p.RepeatLastN != nil {
		s.RepeatLastN = *p.RepeatLastN
	}
	if p.PresencePenalty != nil || p.FrequencyPenalty != nil || p.RepeatPenalty != nil {
		setF(&s.PresencePenalty, p.PresencePenalty)
		setF(&s.FrequencyPenalty, p.FrequencyPenalty)
		setF(&s.RepeatPenalty, p.RepeatPenalty)
		if s.Penalty == "" {
			s.Penalty = "penalty"
		}
	}
	if err := c.Validate(); err != nil {
		return nil, &server.RequestError{Message: err.Error()}
	}
	roles, err := r.st.plug.roles(ctx, &c, hasDraft || len(c.Spec.DrafterNames()) > 0)
	if err != nil {
		return nil, err
	}
	seed := uint64(s.Seed)
	if s.Seed < 0 {
		seed = uint64(time.Now().UnixNano())
	}
	pl := &server.Plugins{
		Policy: roles.Policy, Sampler: roles.Sampler, Penalty: roles.Penalty, Drafters: engineDrafters(roles),
		PolicyName: roles.PolicyName, PolicyVersion: roles.PolicyVersion, SamplerName: s.SamplerName(), Greedy: s.SamplerName() == "greedy",
		Seed: seed, Release: roles.Close,
	}
	return pl, nil
}

// serveModelID is the model id the server reports: --alias, else the model file's
// name without its directory (as llama.cpp reports it).
func serveModelID(cfg *config.Config, alias string) string {
	if alias != "" {
		return alias
	}
	if cfg.Model.Path == "" {
		return embeddedName
	}
	return filepath.Base(cfg.Model.Path)
}
