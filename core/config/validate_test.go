package config

import (
	"strings"
	"testing"
)

func TestInvalidValues(t *testing.T) {
	for _, tc := range []struct {
		name string
		doc  string
		line int
		want []string
	}{
		{"kv", "[model]\nkv = \"q4\"\n", 2, []string{`t.toml:2: [model] kv = "q4": want "f16" or "q8_0"`}},
		{"device", "[model]\ndevice = \"gpu\"\n", 2, []string{`[model] device = "gpu": want "auto", "cpu" or "cuda"`}},
		{"draft device", "[draft]\ndevice = \"tpu\"\n", 2, []string{`[draft] device = "tpu"`}},
		{"draft kv", "[draft]\nkv = \"f32\"\n", 2, []string{`[draft] kv = "f32"`}},
		{"batch", "[model]\nbatch = 0\n", 2, []string{"[model] batch = 0: want an integer in [1, 65536]"}},
		// values the type accepts that broke at run time (issue 23 item 6)
		{"huge batch", "[model]\nbatch = 100000000\n", 2, []string{"[model] batch = 100000000: want an integer in [1, 65536]"}},
		{"huge ctx", "[model]\nctx = 1000000000\n", 2, []string{"[model] ctx = 1000000000"}},
		{"huge threads", "[model]\nthreads = 100000\n", 2, []string{"[model] threads = 100000: want an integer in [0, 1024]"}},
		{"huge parallel", "[server]\nparallel = 100000\n", 2, []string{"[server] parallel = 100000: want an integer in [1, 1024]"}},
		{"tiny write_timeout", "[server]\nwrite_timeout = \"1ms\"\n", 2, []string{`[server] write_timeout = "1ms": want 0 (none) or a duration ≥ 1s`}},
		{"tiny read_timeout", "[server]\nread_timeout = \"10ms\"\n", 2, []string{`[server] read_timeout = "10ms"`}},
		{"tiny read_header_timeout", "[server]\nread_header_timeout = \"1ms\"\n", 2, []string{`[server] read_header_timeout = "1ms": want 0 (none) or a duration ≥ 100ms`}},
		{"tiny send_timeout", "[server]\nsend_timeout = \"5ms\"\n", 2, []string{`[server] send_timeout = "5ms"`}},
		{"max_conns", "[server]\nmax_conns = -1\n", 2, []string{"[server] max_conns = -1"}},
		{"ctx", "[model]\nctx = -5\n", 2, []string{"[model] ctx = -5"}},
		{"threads", "[model]\nthreads = -1\n", 2, []string{"[model] threads = -1"}},
		{"draft_max", "[spec]\ndraft_max = 0\n", 2, []string{"[spec] draft_max = 0: want an integer in [1, 256]"}},
		{"max_batch_rows", "[spec]\nmax_batch_rows = -1\n", 2, []string{"[spec] max_batch_rows = -1: want an integer in [0, 4096]"}},
		{"kv_pool_mb", "[server]\nkv_pool_mb = -1\n", 2, []string{"[server] kv_pool_mb = -1: want an integer in [0, 16777216]"}},
		{"huge max_batch_rows", "[spec]\nmax_batch_rows = 5000\n", 2, []string{"[spec] max_batch_rows = 5000: want an integer in [0, 4096]"}},
		{"batch_depth over max", "[spec]\ndraft_max = 4\nbatch_depth = 8\n", 3, []string{"[spec] batch_depth = 8", "draft_max = 4"}},
		{"batch_depth word", "[spec]\nbatch_depth = \"some\"\n", 2, []string{`[spec] batch_depth = "some": want "off", "auto" or an integer ≥ 0`}},
		{"depth over max", "[spec]\ndraft_max = 4\ndepth = 8\n", 3, []string{"[spec] depth = 8", "draft_max = 4"}},
		{"unknown policy", "[spec]\npolicy = \"wizard\"\n", 2, []string{`[spec] policy = "wizard": no plugin "wizard" declared`, "adaptive"}},
		{"policy of wrong role", "[spec]\npolicy = \"greedy\"\n", 2, []string{`plugin "greedy" is not a policy plugin`}},
		{"fallback same", "[spec]\nfallback = \"adaptive\"\n", 2, []string{"[spec] fallback", "is the policy itself"}},
		{"fallback wrong role", "[spec]\nfallback = \"penalty\"\n", 2, []string{"[spec] fallback", "not a policy plugin"}},
		{"min_conf", "[spec]\nmin_conf = 1.5\n", 2, []string{"[spec] min_conf = 1.5: want a number in [0, 1]"}},
		{"sampler role", "[sampling]\nsampler = \"ucb\"\n", 2, []string{`[sampling] sampler = "ucb"`, "not a sampler plugin"}},
		{"penalty unknown", "[sampling]\npenalty = \"rep\"\n", 2, []string{`[sampling] penalty = "rep": no plugin "rep"`}},
		{"temperature", "[sampling]\ntemperature = -0.1\n", 2, []string{"[sampling] temperature = -0.1"}},
		{"top_p zero", "[sampling]\ntop_p = 0\n", 2, []string{"[sampling] top_p = 0: want a number in (0, 1]"}},
		{"top_p nan", "[sampling]\ntop_p = nan\n", 2, []string{"[sampling] top_p = NaN"}},
		{"min_p", "[sampling]\nmin_p = 2\n", 2, []string{"[sampling] min_p = 2"}},
		{"top_k", "[sampling]\ntop_k = -1\n", 2, []string{"[sampling] top_k = -1"}},
		{"repeat_penalty", "[sampling]\nrepeat_penalty = 0\n", 2, []string{"[sampling] repeat_penalty = 0: want a number > 0"}},
		{"repeat_last_n", "[sampling]\nrepeat_last_n = -2\n", 2, []string{"[sampling] repeat_last_n = -2"}},
		{"presence", "[sampling]\npresence_penalty = 3\n", 2, []string{"[sampling] presence_penalty = 3"}},
		{"seed", "[sampling]\nseed = -7\n", 2, []string{"[sampling] seed = -7"}},
		{"n_predict", "[sampling]\nn_predict = -3\n", 2, []string{"[sampling] n_predict = -3"}},
		{"source missing", "[plugins.mine]\ntimeout = \"1s\"\n", 1, []string{"[plugins.mine] source: missing"}},
		{"source kind", "[plugins.mine]\nsource = \"http://x\"\n", 2, []string{`[plugins.mine] source = "http://x"`}},
		{"source empty ref", "[plugins.mine]\nsource = \"file:\"\n", 2, []string{`[plugins.mine] source = "file:"`}},
		{"builtin unknown", "[plugins.mine]\nsource = \"builtin:nucleus\"\n", 2, []string{`no built-in plugin "nucleus"`, "adaptive, greedy"}},
		{"timeout negative", "[plugins.mine]\nsource = \"file:x.wasm\"\ntimeout = \"-1s\"\n", 3, []string{`[plugins.mine] timeout = "-1s": want a duration > 0`}},
		{"memory", "[plugins.mine]\nsource = \"file:x.wasm\"\nmemory_mb = 5000\n", 3, []string{"[plugins.mine] memory_mb = 5000"}},
		{"role unknown", "[plugins.mine]\nsource = \"file:x.wasm\"\nroles = [\"scheduler\"]\n", 3, []string{`unknown role "scheduler"`}},
		{"drafter unknown", "[spec]\ndrafter = \"ngram,lookahead\"\n", 2, []string{`[spec] drafter = "ngram,lookahead": no plugin "lookahead"`}},
		{"policy source", "[spec]\npolicy = \"file:./x.wasm\"\n", 2, []string{`[spec] policy = "file:./x.wasm": a plugin source, not a name: declare it in a [plugins.NAME] table (source = "file:./x.wasm")`}},
		{"drafter source", "[spec]\ndrafter = \"ngram,builtin:suffix\"\n", 2, []string{`[spec] drafter = "ngram,builtin:suffix": a plugin source, not a name`}},
		{"drafter not one", "[spec]\ndrafter = \"greedy\"\n", 2, []string{`plugin "greedy" is not a drafter plugin`}},
		{"drafter twice", "[spec]\ndrafter = \"ngram, ngram\"\n", 2, []string{`names "ngram" twice`}},
		{"role twice", "[plugins.mine]\nsource = \"file:x.wasm\"\nroles = [\"policy\", \"policy\"]\n", 3, []string{`role "policy" listed twice`}},
		{"builtin role", "[plugins.greedy]\nroles = [\"policy\"]\n", 2, []string{`built-in "greedy" is a sampler plugin only`}},
		{"declared role mismatch", "[plugins.mine]\nsource = \"file:x.wasm\"\nroles = [\"penalty\"]\n[spec]\npolicy = \"mine\"\n", 5, []string{`plugin "mine" is not a policy plugin`}},
		{"plugin name", "[plugins.\"my plugin\"]\nsource = \"file:x.wasm\"\n", 0, []string{`plugin name "my plugin"`}},
		{"addr", "[server]\naddr = \"8080\"\n", 2, []string{`[server] addr = "8080": want host:port`}},
		{"addr port", "[server]\naddr = \"localhost:http2\"\n", 2, []string{`port "http2"`}},
		{"parallel", "[server]\nparallel = 0\n", 2, []string{"[server] parallel = 0"}},
		{"queue", "[server]\nqueue = -1\n", 2, []string{"[server] queue = -1"}},
		{"negative timeout", "[server]\nwrite_timeout = \"-5s\"\n", 2, []string{`[server] write_timeout = "-5s"`}},
		{"api key literal", "[server]\napi_key_env = \"sk-123\"\n", 2, []string{`[server] api_key_env = "sk-123"`, "not the key itself"}},
		{"allow unknown", "[server]\nallow_plugins = [\"greedy\", \"nope\"]\n", 2, []string{`no plugin "nope" declared`}},
		{"max_tokens", "[server]\nmax_tokens = -1\n", 2, []string{"[server] max_tokens = -1"}},
		{"log level", "[log]\nlevel = \"loud\"\n", 2, []string{`[log] level = "loud": want "debug", "info", "warn" or "error"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc), "t.toml")
			wantErr(t, err, tc.line, tc.want...)
		})
	}
}

func TestValidConfigs(t *testing.T) {
	for _, tc := range []struct{ name, doc string }{
		{"speculative", "[draft]\npath = \"d.gguf\"\ndevice = \"cpu\"\nkv = \"q8_0\"\n[spec]\ndepth = 16\nmin_conf = 0.6\nfallback = \"static\"\n"},
		{"greedy", "[sampling]\ntemperature = 0\npenalty = \"penalty\"\nrepeat_penalty = 1.1\n"},
		{"own policy", "[plugins.step]\nsource = \"file:./step.wasm\"\nroles = [\"policy\"]\n[spec]\npolicy = \"step\"\nfallback = \"adaptive\"\n"},
		{"process policy without roles", "[plugins.step]\nsource = \"process:./bin/step\"\n[spec]\npolicy = \"step\"\n"},
		{"server", "[server]\naddr = \":9000\"\napi_key_env = \"MINFER_KEY\"\nallow_plugins = []\nread_timeout = \"0s\"\n"},
		{"server hard edges", "[server]\nqueue = 0\nmax_conns = 0\nsend_timeout = \"0s\"\nread_header_timeout = \"2s\"\nwrite_timeout = \"1s\"\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Parse([]byte(tc.doc), "t.toml"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestValidateAfterChange(t *testing.T) {
	c := Default()
	c.Model.KV = "q4"
	c.Model.CPUOrder = "avx1024"
	c.Spec.Policy = "nope"
	err := c.Validate()
	if err == nil {
		t.Fatal("got no error")
	}
	for _, want := range []string{`config: [model] kv = "q4": want "f16" or "q8_0"`,
		`config: [model] cpu_order = "avx1024": want "avx512" or "avx2"`, `config: [spec] policy = "nope"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if c := Default(); c.Server.Allowed("anything") != true {
		t.Error(`Allowed with ["*"]: got false`)
	}
	s := Server{AllowPlugins: []string{"greedy"}}
	if !s.Allowed("greedy") || s.Allowed("sampling") {
		t.Error("Allowed with a list: wrong answer")
	}
}
