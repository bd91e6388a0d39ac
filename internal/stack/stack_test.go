package stack

import (
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/backend/cpu"
	"github.com/minfer/minfer/core/config"
	"github.com/minfer/minfer/core/gguf"
	"github.com/minfer/minfer/core/server"
	"github.com/minfer/minfer/core/tokenizer"
	"github.com/minfer/minfer/internal/testpath"
	"github.com/minfer/minfer/sdk"
)

// testOptions open the stories260K model of the shared test data where a command
// would open its embedded copy.
func testOptions(t *testing.T) Options {
	path := testpath.Path(t, "models", "stories260K.gguf")
	return Options{Log: io.Discard, EmbeddedName: "embedded:stories260K", Embedded: func() (*gguf.File, error) { return gguf.Open(path) }}
}

// testServer is NewServer's server and stack for cfg and o, closed with the test (the
// server first).
func testServer(t *testing.T, cfg *config.Config, o ServerOptions) (*server.Server, *Stack) {
	t.Helper()
	srv, st, err := NewServer(t.Context(), cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	t.Cleanup(srv.Close)
	return srv, st
}

func TestModelID(t *testing.T) {
	if got := ModelID(&config.Config{Model: config.Model{Path: "/models/qwen.gguf"}}, "", "e"); got != "qwen.gguf" {
		t.Errorf("model id: got %q, want the file name", got)
	}
	if got := ModelID(&config.Config{Model: config.Model{Path: "/models/qwen.gguf"}}, "qwen", "e"); got != "qwen" {
		t.Errorf("model id with --alias: got %q", got)
	}
	if got := ModelID(&config.Config{}, "", "e"); got != "e" {
		t.Errorf("model id of the embedded model: got %q", got)
	}
}

func TestIgnoreEOS(t *testing.T) {
	ctx := t.Context()
	for _, ignore := range []bool{false, true} {
		o := testOptions(t)
		o.IgnoreEOS = ignore
		st, err := Open(ctx, config.Default(), o)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.SessCfg.Vocab.IsEOG(st.Tok.EOS()); got == ignore {
			t.Errorf("ignoreEOS %v: IsEOG(EOS) = %v", ignore, got)
		}
		st.Close()
	}
}

func TestSessionCtx(t *testing.T) {
	for _, tc := range []struct{ ctx, train, want int }{
		{0, 2048, 2048}, {0, 32768, DefaultCtx}, {8192, 32768, 8192}, {100, 2048, 100},
	} {
		if got, _ := SessionCtx(tc.ctx, tc.train); got != tc.want {
			t.Errorf("SessionCtx(%d, %d) = %d, want %d", tc.ctx, tc.train, got, tc.want)
		}
	}
}

// TestSpecFloorsReachEveryPolicy: [spec] min_conf, keep_cut and draft_min hold for a
// policy that answers no cut-off (here static with its own params forcing min_conf 0
// over the config's), as ABI.md says the host applies them.
func TestSpecFloorsReachEveryPolicy(t *testing.T) {
	p := filepath.Join(t.TempDir(), "minfer.toml")
	toml := "[spec]\ndepth = 1\nmin_conf = 0.9\nkeep_cut = true\ndraft_min = 3\n[plugins.static]\nparams = { min_conf = 0.0, keep_cut = false }\n"
	if err := os.WriteFile(p, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := NewPlugins(t.Context(), cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	r, err := ps.Roles(t.Context(), cfg, true)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := r.Policy.NextDepth(t.Context(), sdk.RoundOutcome{Round: -1, MaxDepth: 8})
	if want := (sdk.DepthDecision{Depth: 3, MinConf: 0.9, KeepCut: true}); err != nil || got != want {
		t.Fatalf("got %+v %v, want %+v", got, err, want)
	}
}

// TestServeAliasAndChatTemplate: --alias is the model id /v1/models reports, and
// --chat-template is the template chat requests render with (said on stderr).
func TestServeAliasAndChatTemplate(t *testing.T) {
	cfg := config.Default()
	cfg.Model.Ctx = 256
	cfg.Server.Parallel = 3
	var errb strings.Builder
	o := testOptions(t)
	o.Log = &errb
	srv, st := testServer(t, cfg, ServerOptions{Stack: o, Alias: "tiny-stories", ChatTemplate: "llama3"})
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/v1/models", nil))
	if !strings.Contains(rec.Body.String(), `"id":"tiny-stories"`) {
		t.Errorf("/v1/models: got %s, want the alias as the id", rec.Body.String())
	}
	want, _ := tokenizer.BuiltinTemplate("llama3")
	if st.ChatTemplate.Text != want || st.ChatTemplate.Name != "built-in llama3" || !strings.Contains(errb.String(), "chat template: built-in llama3") || !strings.Contains(errb.String(), "kv cache: 256 positions") || !strings.Contains(errb.String(), "kv pool: 3 blocks of 256 positions, 0.5 MiB for 3 slots") {
		t.Errorf("stderr %q: want the template named and the KV memory printed at start", errb.String())
	}
}

// TestChatTemplateFileNamedInErrors: a --chat-template FILE that passes the trial render
// at start but raises on a later conversation (here: one with a system message) names
// the file in the chat request's error, on the server and in `run --chat` — before,
// both said "chat template override", a name the user never gave.
func TestChatTemplateFileNamedInErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "nosys.jinja")
	src := `{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('no system role') }}{% endif %}{{ m.content }}{% endfor %}`
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Model.Ctx = 128
	cfg.Server.Parallel = 1
	srv, st := testServer(t, cfg, ServerOptions{Stack: testOptions(t), ChatTemplate: file})
	want := "chat template " + file + ": "
	rec := httptest.NewRecorder()
	body := `{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}],"max_tokens":2}`
	srv.Handler().ServeHTTP(rec, httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(body)))
	if rec.Code != 400 || !strings.Contains(rec.Body.String(), want) || !strings.Contains(rec.Body.String(), "no system role") {
		t.Errorf("chat request: got %d %s, want 400 naming %q", rec.Code, rec.Body.String(), want)
	}
	if _, _, err := st.ChatPrompt(t.Context(), "be brief", "hi"); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("ChatPrompt: got %v, want an error naming %q", err, want)
	}
}

// kvCounter is a CPU backend that records the positions of every KV cache allocated.
type kvCounter struct {
	backend.Backend
	ctxs []int
}

func (k *kvCounter) NewKV(spec backend.KVSpec) (backend.KV, error) {
	k.ctxs = append(k.ctxs, spec.Ctx)
	return k.Backend.NewKV(spec)
}

// TestServePoolAllocatesNoWholeContext: serve with its slots on a KV pool allocates no
// cache at start (the stack makes no whole-context session only to free it), while
// without a pool (one slot) the stack's session holds its whole context.
func TestServePoolAllocatesNoWholeContext(t *testing.T) {
	for _, tc := range []struct {
		name     string
		parallel int
		want     []int
	}{
		{"pool", 3, nil},
		{"one slot", 1, []int{256}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Model.Ctx = 256
			cfg.Server.Parallel = tc.parallel
			kc := &kvCounter{Backend: cpu.New(cpu.Options{Threads: 1})}
			o := testOptions(t)
			o.Backend = kc
			_, st := testServer(t, cfg, ServerOptions{Stack: o})
			if (st.Pool != nil) != (tc.want == nil) || !slices.Equal(kc.ctxs, tc.want) {
				t.Errorf("pool %v, caches allocated at start: got %v, want %v", st.Pool != nil, kc.ctxs, tc.want)
			}
		})
	}
}

// TestServePagedCaches: on the CPU serve's pooled slots get paged caches (said on
// stderr); a pool too large for the system to reserve as an arena leaves the caches
// unpaged, said, instead of failing to start.
func TestServePagedCaches(t *testing.T) {
	for _, tc := range []struct {
		name   string
		poolMB int
		paged  bool
		say    string
	}{
		{"paged", 0, true, "paged, prompt prefixes shared between slots"},
		{"too large to reserve", 1 << 24, false, "kv pool: caches not paged"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Model.Ctx = 256
			cfg.Server.Parallel = 2
			cfg.Server.KVPoolMB = tc.poolMB
			var errb strings.Builder
			o := testOptions(t)
			o.Log = &errb
			srv, st := testServer(t, cfg, ServerOptions{Stack: o})
			if (st.Paging != nil) != tc.paged || !strings.Contains(errb.String(), tc.say) {
				t.Errorf("paging %v, stderr %q; want %v and %q", st.Paging != nil, errb.String(), tc.paged, tc.say)
			}
			rec := httptest.NewRecorder()
			srv.Handler().ServeHTTP(rec, httptest.NewRequest("POST", "/v1/completions", strings.NewReader(`{"prompt": "Once upon a time", "max_tokens": 4}`)))
			if rec.Code != 200 {
				t.Errorf("a request: status %d: %s", rec.Code, rec.Body.String())
			}
		})
	}
}

// TestOpenErrorsNameTheirSource: a model file that is not there is named with the flag
// and the config key that gave it, and an unwritable trace path is reported before any
// model is loaded (a missing model file and a bad trace path give the trace's error).
func TestOpenErrorsNameTheirSource(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.gguf")
	for _, tc := range []struct {
		name  string
		edit  func(*config.Config)
		wants []string
	}{
		{"target", func(c *config.Config) { c.Model.Path = missing }, []string{"target model (-m, or [model] path in the config)", "missing.gguf"}},
		{"draft", func(c *config.Config) { c.Draft.Path = missing }, []string{"draft model (--draft, or [draft] path in the config)", "missing.gguf"}},
		{"trace first", func(c *config.Config) {
			c.Model.Path = missing
			c.Log.Trace = filepath.Join(t.TempDir(), "no-such-dir", "trace.jsonl")
		}, []string{"trace: ", "no-such-dir"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			tc.edit(cfg)
			o := testOptions(t)
			o.Backend = cpu.New(cpu.Options{Threads: 1})
			st, err := Open(t.Context(), cfg, o)
			if err == nil {
				st.Close()
				t.Fatal("Open: got no error")
			}
			for _, w := range tc.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Open: got %q, want it to contain %q", err, w)
				}
			}
		})
	}
}
