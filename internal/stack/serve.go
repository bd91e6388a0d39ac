package stack

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/minfer/minfer/core/config"
	"github.com/minfer/minfer/core/engine"
	"github.com/minfer/minfer/core/kv"
	"github.com/minfer/minfer/core/model"
	"github.com/minfer/minfer/core/server"
	"github.com/minfer/minfer/sdk"
)

var _ server.Resolver = (*resolver)(nil)

// ServerOptions are NewServer's options.
type ServerOptions struct {
	Stack        Options // the stack's (its Verbose is set: the models and KV memory are printed at start)
	Verbose      bool    // log every request on Stack.Log
	Alias        string  // the model id reported ("" = the model file's name)
	ChatTemplate string  // --chat-template ("" = the model's, else chatml)
}

// queueSize maps [server] queue to server.Options.QueueSize: 0 in the config means
// that no request waits (server.Options spells that as a negative size).
func queueSize(q int) int {
	if q == 0 {
		return -1
	}
	return q
}

// NewServer loads the models and plugins of cfg and makes the API server with its slots;
// the server is closed before the stack.
func NewServer(ctx context.Context, cfg *config.Config, o ServerOptions) (*server.Server, *Stack, error) {
	verbose := o.Verbose
	so := o.Stack
	so.Verbose = true // the model and the KV memory, at start
	if so.Log == nil {
		so.Log = io.Discard
	}
	if cfg.Server.BatchRows > 0 && cfg.Server.Parallel > 1 {
		so.Batching = engine.NewBatching(cfg.Server.BatchRows)
		so.Batching.BatchDepth(batchDepth(cfg.Spec.BatchDepth))
	}
	so.Pooled = true
	st, err := Open(ctx, cfg, so)
	if err != nil {
		return nil, nil, err
	}
	if err := st.UseChatTemplate(o.ChatTemplate); err != nil {
		st.Close()
		return nil, nil, err
	}
	if so.Batching != nil && cfg.Spec.BatchDepth == config.BatchDepthAuto && st.Draft != nil {
		cal, err := so.Batching.Calibrate(st.Target, st.Draft, st.SessCfg.KVType, st.SessCfg.DraftKVType, cfg.Server.Parallel, calibrateBudget)
		if err != nil {
			fmt.Fprintf(so.Log, "batch depth auto: %v; batches decode plainly\n", err)
		} else {
			fmt.Fprintf(so.Log, "batch depth auto: %s\n", cal)
		}
	}
	pool := st.Pool
	switch n := cfg.Server.Parallel; {
	case pool != nil && st.Paging != nil:
		fmt.Fprintf(so.Log, "kv pool: %d blocks of %d positions, %.1f MiB for %d slots, taken as their sequences grow; paged, prompt prefixes shared between slots and counted once\n",
			pool.Blocks(), pool.Block(), float64(pool.Bytes())/(1<<20), n)
	case pool != nil:
		fmt.Fprintf(so.Log, "kv pool: %d blocks of %d positions, %.1f MiB for %d slots, taken as their sequences grow\n",
			pool.Blocks(), pool.Block(), float64(pool.Bytes())/(1<<20), n)
	case n > 1: // a session, and its caches, per slot
		fmt.Fprintf(so.Log, "kv cache: %d slots × %.1f MiB = %.1f MiB\n", n, float64(st.KVBytes())/(1<<20), float64(n)*float64(st.KVBytes())/(1<<20))
	}
	apiKey := ""
	if cfg.Server.APIKeyEnv != "" {
		if apiKey = os.Getenv(cfg.Server.APIKeyEnv); apiKey == "" {
			st.Close()
			return nil, nil, fmt.Errorf("serve: [server] api_key_env names %s, which is empty or unset", cfg.Server.APIKeyEnv)
		}
	}
	logw := so.Log
	if !verbose {
		logw = nil
	}

	srv, err := server.New(server.Options{
		ModelID:   ModelID(cfg, o.Alias, so.EmbeddedName),
		Tokenizer: st.Tok, ChatTemplate: st.ChatTemplate,
		NewSession: func() (*engine.Session, error) {
			if s := st.Sess; s != nil { // the stack's own session becomes the first slot
				st.Sess = nil
				return s, nil
			}
			return engine.NewSession(st.SessCfg)
		},
		Parallel: cfg.Server.Parallel, QueueSize: queueSize(cfg.Server.Queue),
		Resolver:  &resolver{st: st, cfg: cfg},
		MaxTokens: cfg.Server.MaxTokens, APIKey: apiKey, Log: logw, Warn: so.Log, KVPool: poolStats(pool), KVPaged: pagedStats(st.Paging),
		ReadTimeout: cfg.Server.ReadTimeout, WriteTimeout: cfg.Server.WriteTimeout, IdleTimeout: cfg.Server.IdleTimeout,
		ReadHeaderTimeout: cfg.Server.ReadHeaderTimeout, SendTimeout: cfg.Server.SendTimeout, MaxConns: cfg.Server.MaxConns,
	})
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	if so.Batching != nil {
		so.Batching.Observe(func(m *model.Model, seqs, rows int, d time.Duration) {
			name := "target"
			if m != st.Target {
				name = "draft"
			}
			srv.ObserveForward(name, seqs, rows, d)
		})
	}
	return srv, st, nil
}

// kvPool makes the slots' KV block pool ([server] kv_pool_mb) and has the stack's
// sessions take their caches from it: nil with one slot, or on a backend that cannot
// page (one that captures graphs: CUDA), where each slot keeps a whole context. Open
// calls it before it would make the stack's session, so none is made only to be freed.
func (st *Stack) kvPool(cfg *config.Config) (*kv.Pool, error) {
	if cfg.Server.Parallel < 2 || st.Target.CapturesGraphs() || st.Draft != nil && st.Draft.CapturesGraphs() {
		return nil, nil
	}
	c := st.SessCfg
	ctxN := c.Ctx
	block := kv.DefaultBlock
	blockBytes := kv.SpecBytes(st.Target.KVSpec(block, c.KVType))
	if st.Draft != nil {
		blockBytes += kv.SpecBytes(st.Draft.KVSpec(block, c.DraftKVType))
	}
	blocks := cfg.Server.Parallel * ((ctxN + block - 1) / block)
	if mb := cfg.Server.KVPoolMB; mb > 0 {
		if blocks = int((int64(mb) << 20) / blockBytes); blocks < 1 {
			return nil, fmt.Errorf("serve: [server] kv_pool_mb = %d holds no block of %d positions (%.2f MiB)", mb, block, float64(blockBytes)/(1<<20))
		}
	}
	pool, err := kv.NewPool(block, blocks, blockBytes)
	if err != nil {
		return nil, err
	}
	st.SessCfg.Pool = pool
	// on a backend that pages (the CPU) the caches are views of one arena per model,
	// sharing prompt prefixes between slots
	if st.Paging, err = engine.NewPaging(pool, st.Target, st.Draft, c.KVType, c.DraftKVType); err != nil {
		// an arena the system will not reserve (a budget past what it maps): the
		// pool still bounds whole caches, which grow as the sequences do
		fmt.Fprintf(st.log, "kv pool: caches not paged: %v\n", err)
		st.Paging = nil
	}
	st.SessCfg.Paging = st.Paging
	return pool, nil
}

// pagedStats is p as the server reads it (nil stays nil).
func pagedStats(p *engine.Paging) server.KVPaged {
	if p == nil {
		return nil
	}
	return p
}

// poolStats is pool as the server reads it (nil stays nil, not a typed nil).
func poolStats(p *kv.Pool) server.KVPool {
	if p == nil {
		return nil
	}
	return p
}

// resolver turns a request's sampling parameters and plugin choices into plugin
// instances: the config's defaults, overridden by what the request sets.
type resolver struct {
	st  *Stack
	cfg *config.Config
}

func (r *resolver) Resolve(ctx context.Context, p server.Params, hasDraft bool) (*server.Plugins, error) {
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
	if p.Drafter != nil {
		names, err := r.requestDrafters(*p.Drafter)
		if err != nil {
			return nil, &server.RequestError{Param: "minfer.drafter", Message: err.Error()}
		}
		c.Spec.Drafter = strings.Join(names, ",")
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
	roles, err := r.st.Plug.Roles(ctx, &c, hasDraft || len(c.Spec.DrafterNames()) > 0)
	if err != nil {
		return nil, err
	}
	seed := Seed(s.Seed)
	pl := &server.Plugins{
		Policy: roles.Policy, Sampler: roles.Sampler, Penalty: roles.Penalty, Drafters: EngineDrafters(roles),
		PolicyName: roles.PolicyName, PolicyVersion: roles.PolicyVersion, SamplerName: s.SamplerName(), Greedy: s.SamplerName() == "greedy",
		Seed: seed, Release: roles.Close,
	}
	return pl, nil
}

// requestDrafters checks a request's minfer.drafter: comma-separated drafter plugins
// the config declares and [server] allow_plugins allows, each once; "" or "none" is
// none.
func (r *resolver) requestDrafters(arg string) ([]string, error) {
	if a := strings.TrimSpace(arg); a == "" || a == "none" {
		return nil, nil
	}
	var names []string
	for _, name := range strings.Split(arg, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			return nil, fmt.Errorf("empty name in %q (want names such as \"ngram,suffix\", or \"none\")", arg)
		}
		if slices.Contains(names, name) {
			return nil, fmt.Errorf("names %q twice", name)
		}
		if err := r.cfg.CheckRequestPlugin(sdk.RoleDrafter, name); err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	return names, nil
}

// ModelID is the model id the server reports: --alias, else the model file's name
// without its directory (as llama.cpp reports it), embedded for the embedded model.
func ModelID(cfg *config.Config, alias, embedded string) string {
	if alias != "" {
		return alias
	}
	if cfg.Model.Path == "" {
		return embedded
	}
	return filepath.Base(cfg.Model.Path)
}

// batchDepth is [spec] batch_depth as engine.Batching.BatchDepth takes it.
func batchDepth(c config.BatchDepth) int {
	switch c {
	case config.BatchDepthOff:
		return engine.DepthOff
	case config.BatchDepthAuto:
		return engine.BatchAuto
	}
	return int(c)
}

// calibrateBudget bounds the time batch depth "auto" measures the models' batched
// forwards for at start (engine.Batching.Calibrate; some 0.6 s on the H200 for a 7B
// target, a 0.5B draft and 32 slots).
const calibrateBudget = 3 * time.Second
