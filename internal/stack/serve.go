package stack

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/minfer/minfer/core/config"
	"github.com/minfer/minfer/core/engine"
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
	}
	st, err := Open(ctx, cfg, so)
	if err != nil {
		return nil, nil, err
	}
	if err := st.UseChatTemplate(o.ChatTemplate); err != nil {
		st.Close()
		return nil, nil, err
	}
	if n := cfg.Server.Parallel; n > 1 { // a session, and its caches, per slot
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
		MaxTokens: cfg.Server.MaxTokens, APIKey: apiKey, Log: logw,
		ReadTimeout: cfg.Server.ReadTimeout, WriteTimeout: cfg.Server.WriteTimeout, IdleTimeout: cfg.Server.IdleTimeout,
		ReadHeaderTimeout: cfg.Server.ReadHeaderTimeout, SendTimeout: cfg.Server.SendTimeout, MaxConns: cfg.Server.MaxConns,
	})
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	if so.Batching != nil {
		so.Batching.Observe(srv.ObserveForward)
	}
	return srv, st, nil
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
