// Package stack opens what a generating command holds (run, the chat REPL, serve,
// specbench): the backend, the target and draft models, the tokenizer, a session and
// the plugin registry with its tracer, and builds each request's engine.Request with
// fresh plugin instances. cmd/minfer parses flags into a config.Config and calls it.
package stack

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/backend/cpu"
	"github.com/minfer/minfer/core/backend/cuda"
	"github.com/minfer/minfer/core/config"
	"github.com/minfer/minfer/core/engine"
	"github.com/minfer/minfer/core/gguf"
	"github.com/minfer/minfer/core/kv"
	"github.com/minfer/minfer/core/model"
	"github.com/minfer/minfer/core/server"
	"github.com/minfer/minfer/core/tokenizer"
	"github.com/minfer/minfer/internal/usage"
)

// Stack is everything a generating command holds: backend, models, tokenizer,
// session, and the plugin instances of the current request. Close releases it all.
type Stack struct {
	B      backend.Backend
	Target *model.Model
	Draft  *model.Model // nil without a draft model
	Tok    *tokenizer.Tokenizer
	// Sess is the stack's session (serve hands it to its first slot and sets it nil);
	// nil when the sessions take their caches from Pool.
	Sess *engine.Session
	// Pool is the KV block pool SessCfg's sessions take their caches from (Options.Pooled),
	// or nil.
	Pool *kv.Pool
	// Paging holds the pooled sessions' paged caches where the backend pages, or nil.
	Paging *engine.Paging
	Plug   *Plugins
	// SessCfg makes a session on the stack's models (the server makes one per slot).
	SessCfg engine.Config
	// ChatTemplate is the template UseChatTemplate chose (no text: the model's), named
	// as the user gave it.
	ChatTemplate server.Template

	log          io.Writer
	closeRequest func()
}

// Options are Open's options.
type Options struct {
	Log      io.Writer // where the models, the KV memory and notes are printed (stderr)
	Terminal bool      // Log is a terminal: big models get a redrawn progress bar
	Verbose  bool      // print the models, the context and the KV memory on Log
	// IgnoreEOS: end-of-generation tokens do not end a generation (--ignore-eos).
	IgnoreEOS bool
	// Batching, when set, batches the forwards of every session made from the stack's
	// config (serve's slots).
	Batching *engine.Batching
	// Backend, when set, is the backend the stack runs on (and closes) instead of the
	// one NewBackend makes for cfg.
	Backend backend.Backend
	// Embedded opens the model run when [model] path is "" (named EmbeddedName).
	Embedded     func() (*gguf.File, error)
	EmbeddedName string
	// Pooled (serve) has the sessions take their caches from a KV block pool where
	// [server] and the backend allow it (Stack.Pool): the stack then makes no session
	// of its own, whose whole context the slots would not use.
	Pooled bool
}

// DefaultCtx caps the context when [model] ctx is 0: the model's training context
// (32K and more for current models) would take 1.8 GiB of f16 KV per sequence for a
// 7B, times serve's --parallel; llama.cpp's server took 4096 by default for years.
const DefaultCtx = 4096

// SessionCtx is the context of a session: [model] ctx, else the model's training
// context capped at DefaultCtx, with a note for the KV line when it was capped.
func SessionCtx(ctx, train int) (int, string) {
	if ctx > 0 {
		return ctx, ""
	}
	if train > DefaultCtx {
		return DefaultCtx, fmt.Sprintf(" (the model's %d capped at %d; --ctx sets it)", train, DefaultCtx)
	}
	return train, ""
}

// Open loads the models named by cfg (the embedded model when none) and opens a
// session.
func Open(ctx context.Context, cfg *config.Config, o Options) (*Stack, error) {
	if o.Log == nil {
		o.Log = io.Discard
	}
	b := o.Backend
	if b == nil {
		var err error
		if b, err = NewBackend(cfg); err != nil {
			return nil, err
		}
	}
	st := &Stack{B: b, log: o.Log, closeRequest: func() {}}
	fail := func(err error) (*Stack, error) { st.Close(); return nil, err }
	var tf *gguf.File
	var err error
	// Plugins and the trace file first: a broken plugin or an unwritable --trace path is
	// reported before minutes of model loading, not after.
	if st.Plug, err = NewPlugins(ctx, cfg, o.Log); err != nil {
		return fail(err)
	}
	if st.Target, tf, err = LoadModel(b, cfg.ResolvePath(cfg.Model.Path), "target", o); err != nil {
		return fail(err)
	}
	if st.Tok, err = tokenizer.FromGGUF(tf); err != nil {
		return fail(fmt.Errorf("%s: %w", cfg.ResolvePath(cfg.Model.Path), err)) // name the file, as a model error does
	}
	if cfg.Draft.Path != "" {
		var df *gguf.File
		if st.Draft, df, err = LoadModel(b, cfg.ResolvePath(cfg.Draft.Path), "draft", o); err != nil {
			return fail(err)
		}
		if err := engine.CheckVocab(tf, df); err != nil {
			return fail(fmt.Errorf("--draft %s: %w", cfg.Draft.Path, err))
		}
	}
	kt, err := kv.ParseType(cfg.Model.KV)
	if err != nil {
		return fail(usage.Errorf("%v", err))
	}
	dkt, err := kv.ParseType(cfg.Draft.KV)
	if err != nil {
		return fail(usage.Errorf("%v", err))
	}
	ctxN, ctxNote := SessionCtx(cfg.Model.Ctx, st.Target.Params.CtxTrain)
	var vocab engine.Vocab = server.TokenizerVocab(st.Tok)
	if o.IgnoreEOS {
		vocab = noEOG{vocab}
	}
	st.SessCfg = engine.Config{Target: st.Target, Draft: st.Draft, Vocab: vocab,
		Ctx: ctxN, KVType: kt, DraftKVType: dkt, Batch: cfg.Model.Batch, DraftMax: cfg.Spec.DraftMax, Batching: o.Batching,
		MaxBatchRows: cfg.Spec.MaxBatchRows, DrafterOffers: cfg.Spec.DrafterOffers}
	if o.Pooled {
		if st.Pool, err = st.kvPool(cfg); err != nil {
			return fail(err)
		}
	}
	if st.Pool == nil {
		if st.Sess, err = engine.NewSession(st.SessCfg); err != nil {
			return fail(err)
		}
		ctxN = st.Sess.Ctx()
	}
	if o.Verbose {
		fmt.Fprintf(o.Log, "kv cache: %d positions%s, %s, %.1f MiB\n", ctxN, ctxNote, kt, float64(st.KVBytes())/(1<<20))
	}
	return st, nil
}

// KVBytes is the KV memory of one session of the stack (target and draft caches).
func (st *Stack) KVBytes() int64 {
	c := st.SessCfg
	ctxN := c.Ctx
	if st.Sess != nil {
		ctxN = st.Sess.Ctx()
	}
	b := kv.SpecBytes(st.Target.KVSpec(ctxN, c.KVType))
	if st.Draft != nil {
		b += kv.SpecBytes(st.Draft.KVSpec(ctxN, c.DraftKVType))
	}
	return b
}

// noEOG is a vocabulary without end-of-generation tokens (--ignore-eos): they are
// generated, and shown, like any other token.
type noEOG struct{ engine.Vocab }

func (noEOG) IsEOG(int32) bool { return false }

// UseChatTemplate sets the template the stack's chat prompts are rendered with:
// name is a built-in template's name or a Jinja template file ("" = the model's). With
// neither, chatml is used, and the log says so.
func (st *Stack) UseChatTemplate(name string) error {
	switch {
	case name != "":
		if src, ok := tokenizer.BuiltinTemplate(name); ok {
			st.ChatTemplate = server.Template{Text: src, Name: "built-in " + name}
			fmt.Fprintf(st.log, "chat template: built-in %s (--chat-template)\n", name)
			return nil
		}
		b, err := os.ReadFile(name)
		if err != nil {
			return usage.Errorf("--chat-template %s: not a built-in template (%s) and not a readable file: %v",
				name, strings.Join(tokenizer.BuiltinTemplateNames(), ", "), err)
		}
		// a trial render of the plainest conversation, so that a file that does not
		// parse, raises or passes a render limit fails here, naming the file, and not
		// at every chat request of a server that started
		msgs := []tokenizer.Message{{Role: "user", Content: "Hello"}}
		if _, err := st.Tok.RenderChatPrompt(context.Background(), string(b), msgs, true, tokenizer.RenderOptions{Name: name}); err != nil {
			return usage.Errorf("--chat-template: %v", err)
		}
		st.ChatTemplate = server.Template{Text: string(b), Name: name}
		fmt.Fprintf(st.log, "chat template: %s (--chat-template)\n", name)
	case st.Tok.ChatTemplate() == "":
		src, _ := tokenizer.BuiltinTemplate("chatml")
		st.ChatTemplate = server.Template{Text: src, Name: "built-in chatml"}
		fmt.Fprintln(st.log, "chat template: the model has none; using the built-in chatml (--chat-template NAME|FILE picks another)")
	}
	return nil
}

// Close releases the request's plugin instances, the plugins, the session, the
// models and the backend.
func (st *Stack) Close() {
	st.closeRequest()
	if st.Plug != nil {
		st.Plug.Close()
	}
	if st.Sess != nil {
		st.Sess.Close()
	}
	if st.Paging != nil { // the server closed its sessions first
		st.Paging.Close()
	}
	for _, md := range []*model.Model{st.Draft, st.Target} {
		if md != nil {
			md.Close()
		}
	}
	st.B.Close()
}

// Request builds an engine request for ids with fresh plugin instances (those of the
// previous request are released first; CloseRequest releases them). The caller adds
// what the command line asks beyond cfg (stop strings, top logits, OnText).
func (st *Stack) Request(ctx context.Context, cfg *config.Config, ids []int32) (engine.Request, error) {
	st.closeRequest()
	roles, err := st.Plug.Roles(ctx, cfg, st.Speculates(cfg))
	if err != nil {
		return engine.Request{}, err
	}
	st.closeRequest = roles.Close
	return engine.Request{Prompt: ids, NPredict: cfg.Sampling.NPredict, Seed: Seed(cfg.Sampling.Seed),
		Sampler: roles.Sampler, Penalty: roles.Penalty, Policy: roles.Policy, PolicyName: roles.PolicyName,
		Drafters: EngineDrafters(roles), OnDrafterFailure: st.drafterFailed}, nil
}

// drafterFailed reports a drafter plugin's failure in a request (it is off for the
// rest of the request, and its rounds fall back).
func (st *Stack) drafterFailed(name string, err error) {
	fmt.Fprintf(st.log, "minfer: drafter %q failed and is off for the request, its rounds fall back (the draft model, else plain decoding): %v\n",
		name, err)
}

// ChatPrompt renders the conversation of system (none when "") and user with the
// stack's chat template and encodes it as the server does (server.RenderChat,
// server.EncodePrompt), so run, the REPL and the server agree. It returns the rendered
// text and its tokens.
func (st *Stack) ChatPrompt(ctx context.Context, system, user string) (string, []int32, error) {
	var msgs []tokenizer.Message
	if system != "" {
		msgs = append(msgs, tokenizer.Message{Role: "system", Content: system})
	}
	msgs = append(msgs, tokenizer.Message{Role: "user", Content: user})
	p, err := server.RenderChat(ctx, st.Tok, st.ChatTemplate, msgs)
	if err != nil {
		return "", nil, err
	}
	ids, err := server.EncodePrompt(ctx, st.Tok, p)
	if err != nil {
		return "", nil, err
	}
	return p.Text, ids, nil
}

// CloseRequest releases the plugin instances of the last Request.
func (st *Stack) CloseRequest() { st.closeRequest() }

// Seed is the sampling seed of [sampling] seed: a negative one is random.
func Seed(s int64) uint64 {
	if s < 0 {
		return uint64(time.Now().UnixNano())
	}
	return uint64(s)
}

// Speculates reports whether requests on st run speculative rounds under cfg: with a
// draft model or a drafter plugin.
func (st *Stack) Speculates(cfg *config.Config) bool {
	return st.Draft != nil || len(cfg.Spec.DrafterNames()) > 0
}

// NewBackend makes the backend cfg asks for: "cpu", "cuda" (an error naming what is
// missing when no usable GPU is there) or "auto" (CUDA when cuda.Available, else the
// CPU).
func NewBackend(cfg *config.Config) (backend.Backend, error) {
	dev := cfg.Model.Device
	if dev == config.DeviceAuto || dev == "" {
		dev = config.DeviceCPU
		if ok, _ := cuda.Available(); ok {
			dev = config.DeviceCUDA
		}
	}
	switch dev {
	case config.DeviceCPU:
		order, err := cpu.ParseOrder(cfg.Model.CPUOrder)
		if err != nil {
			return nil, err
		}
		return cpu.New(cpu.Options{Threads: cfg.Model.Threads, Order: order}), nil
	case config.DeviceCUDA:
		b, err := cuda.Open(cuda.Options{})
		if err != nil {
			return nil, fmt.Errorf("device cuda: %w", err)
		}
		return b, nil
	}
	return nil, fmt.Errorf("device %q: want auto, cpu or cuda", cfg.Model.Device)
}

// modelSource names the flag and the config key that give the model of namespace ns.
func modelSource(ns string) string {
	if ns == "draft" {
		return "--draft, or [draft] path in the config"
	}
	return "-m, or [model] path in the config"
}

// LoadModel opens path (o.Embedded when "") and loads it on b under the namespace ns,
// printing its size on o.Log (and a progress bar for big files on a terminal), and with
// o.Verbose its shape.
func LoadModel(b backend.Backend, path, ns string, o Options) (*model.Model, *gguf.File, error) {
	if o.Log == nil {
		o.Log = io.Discard
	}
	var f *gguf.File
	var err error
	name := path
	switch {
	case path != "":
		f, err = gguf.Open(path)
	case o.Embedded != nil:
		name = o.EmbeddedName
		f, err = o.Embedded()
	default:
		err = fmt.Errorf("%s: no model file given", ns)
	}
	if err != nil {
		if path != "" { // say where the path came from: the flag or the config key
			return nil, nil, fmt.Errorf("%s model (%s): %w", ns, modelSource(ns), err)
		}
		return nil, nil, err
	}
	opt := model.Options{Name: ns}
	if !o.Terminal && f.Size() > 256<<20 { // a start line where no bar can be drawn
		fmt.Fprintf(o.Log, "loading %s: %s, %.0f MiB\n", ns, name, float64(f.Size())/(1<<20))
	}
	if o.Terminal && f.Size() > 256<<20 {
		opt.Progress = func(done, total int64) {
			const w = 40
			k := int(float64(w) * float64(done) / float64(max(total, 1)))
			fmt.Fprintf(o.Log, "\rloading %s [%s%s] %3.0f%%", ns, strings.Repeat("=", k), strings.Repeat(" ", w-k), 100*float64(done)/float64(max(total, 1)))
			if done == total {
				fmt.Fprintln(o.Log)
			}
		}
	}
	md, err := model.Load(b, f, opt)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	if o.Verbose {
		p := md.Params
		fmt.Fprintf(o.Log, "%s: %s, %s, %d layers, n_embd %d, heads %d/%d, vocab %d, weights %.1f MiB\n",
			ns, name, p.Arch, p.Layers, p.Embd, p.Heads, p.KVHeads, p.Vocab, float64(md.WeightBytes)/(1<<20))
	}
	return md, f, nil
}
