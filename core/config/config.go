// Package config is the schema of minfer.toml: the models to load, speculative decoding,
// sampling, the plugin table, the HTTP server and logging, with their defaults.
//
// Decoding is strict (see Parse): a key the schema does not know, or a value of the wrong
// TOML type, is an error that names the key and its line. Only the params table of a
// plugin is free-form: it is handed to the plugin as JSON. Value checks (enumerations,
// ranges, references between sections) live in one place, Validate.
//
// Every absent key takes its value from Default(). The file minfer.toml at the root of the
// repository is Default() written out with every key commented, and a test keeps the two
// equal.
//
// A Config is a plain value: callers may copy and modify it (command-line flags override
// fields after loading) and should call Validate again after changing it.
package config

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/minfer/minfer/sdk"
)

// Config is the whole of minfer.toml.
type Config struct {
	Model    Model             `toml:"model"`
	Draft    Draft             `toml:"draft"`
	Spec     Spec              `toml:"spec"`
	Sampling Sampling          `toml:"sampling"`
	Plugins  map[string]Plugin `toml:"plugins"` // by plugin name; see Plugin
	Server   Server            `toml:"server"`
	Log      Log               `toml:"log"`

	// Dir is the directory of the file the config was read from ("" for Default and for
	// Parse without a file name). ResolvePath joins relative paths to it. Not a TOML key.
	Dir string `toml:"-"`
}

// Device names accepted by Model.Device and Draft.Device.
const (
	DeviceAuto = "auto" // CUDA when a usable GPU is present, else the CPU
	DeviceCPU  = "cpu"
	DeviceCUDA = "cuda"
)

// KV cache element types accepted by Model.KV and Draft.KV.
const (
	KVF16  = "f16"
	KVQ8_0 = "q8_0"
)

// [model] cpu_order values.
const (
	CPUOrderAVX512 = "avx512"
	CPUOrderAVX2   = "avx2"
)

// Model is [model]: the target model.
type Model struct {
	Path    string `toml:"path"`    // GGUF file; "" = the embedded default model
	Device  string `toml:"device"`  // DeviceAuto, DeviceCPU or DeviceCUDA
	Ctx     int    `toml:"ctx"`     // context length in tokens; 0 = the model's trained length
	Batch   int    `toml:"batch"`   // prompt tokens per prefill forward (llama.cpp -b)
	Threads int    `toml:"threads"` // CPU threads; 0 = the number of physical cores
	KV      string `toml:"kv"`      // KV cache type: KVF16 or KVQ8_0
	// CPUOrder is which llama.cpp CPU build's float rounding the CPU backend
	// reproduces: CPUOrderAVX512 or CPUOrderAVX2 (core/backend/cpu.Order).
	CPUOrder string `toml:"cpu_order"`
}

// Draft is [draft]: the draft model for speculative decoding.
type Draft struct {
	Path   string `toml:"path"`   // GGUF file; "" = no draft (plain decoding)
	Device string `toml:"device"` // "" = the same as [model] device, else as Model.Device
	KV     string `toml:"kv"`     // KVF16 or KVQ8_0
}

// Depth is [spec] depth: DepthAuto lets the policy plugin decide each round; N ≥ 0 forces
// a static depth of N draft tokens per round (0 = plain decoding). In TOML it is "auto",
// an integer, or an integer written as a string.
type Depth int

// DepthAuto is the Depth meaning "the policy decides".
const DepthAuto Depth = -1

// UnmarshalTOML implements toml.Unmarshaler.
func (d *Depth) UnmarshalTOML(v any) error {
	n, err := depthSyntax.toml(v)
	if err == nil {
		*d = Depth(n)
	}
	return err
}

// maxDepthValue keeps a parsed depth far from int overflow; Validate then bounds it by
// draft_max.
const maxDepthValue = 1 << 30

// UnmarshalText parses "auto" or a non-negative integer.
func (d *Depth) UnmarshalText(b []byte) error {
	n, err := depthSyntax.text(string(b))
	if err == nil {
		*d = Depth(n)
	}
	return err
}

// Set implements flag.Value, so a command can bind --depth N|auto to Spec.Depth:
//
//	fs.Var(&cfg.Spec.Depth, "depth", `draft depth: "auto" (the policy decides) or N`)
func (d *Depth) Set(s string) error { return d.UnmarshalText([]byte(s)) }

// MarshalText writes "auto" or the integer.
func (d Depth) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

func (d Depth) String() string { return depthSyntax.format(int(d)) }

// BatchDepth is [spec] batch_depth: the depth every round takes while two or more of a
// server's slots generate in one batch. BatchDepthOff leaves each round to its policy;
// N ≥ 0 drafts N tokens every round of every sequence in the batch, in lockstep (0: no
// speculation in a batch); BatchDepthAuto chooses that depth by the batch's size from
// what the two models' batched forwards cost, measured when the server starts. In TOML
// it is "off", "auto", an integer, or an integer written as a string.
type BatchDepth int

// BatchDepthOff and BatchDepthAuto are BatchDepth's modes besides a fixed depth
// (internal/stack maps them to engine.DepthOff and engine.BatchAuto).
const (
	BatchDepthOff  BatchDepth = -1
	BatchDepthAuto BatchDepth = -2
)

// UnmarshalTOML implements toml.Unmarshaler.
func (c *BatchDepth) UnmarshalTOML(v any) error {
	n, err := batchDepthSyntax.toml(v)
	if err == nil {
		*c = BatchDepth(n)
	}
	return err
}

// UnmarshalText parses "off", "auto" or a non-negative integer.
func (c *BatchDepth) UnmarshalText(b []byte) error {
	n, err := batchDepthSyntax.text(string(b))
	if err == nil {
		*c = BatchDepth(n)
	}
	return err
}

// Set implements flag.Value (--batch-depth).
func (c *BatchDepth) Set(s string) error { return c.UnmarshalText([]byte(s)) }

// MarshalText writes "off", "auto" or the integer.
func (c BatchDepth) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

func (c BatchDepth) String() string { return batchDepthSyntax.format(int(c)) }

// wordDepth is the syntax Depth and BatchDepth share: one of a few words (each meaning
// a value of its own) or an integer in [0, maxDepthValue], in TOML an integer or a
// string of either; key names the setting in errors.
type wordDepth struct {
	key   string
	words []depthWord
}

// depthWord is a word of a wordDepth and the value it means.
type depthWord struct {
	word string
	as   int
}

var (
	depthSyntax      = wordDepth{key: "depth", words: []depthWord{{"auto", int(DepthAuto)}}}
	batchDepthSyntax = wordDepth{key: "batch_depth", words: []depthWord{{"off", int(BatchDepthOff)}, {"auto", int(BatchDepthAuto)}}}
)

// toml parses a TOML value.
func (w wordDepth) toml(v any) (int, error) {
	switch v := v.(type) {
	case int64:
		if v < 0 || v > maxDepthValue {
			return 0, fmt.Errorf("%s %d: want %s", w.key, v, w.want())
		}
		return int(v), nil
	case string:
		return w.text(v)
	}
	return 0, fmt.Errorf("%s: got %T, want %s or an integer", w.key, v, w.quoted())
}

// text parses a word or a non-negative integer.
func (w wordDepth) text(s string) (int, error) {
	s = strings.TrimSpace(s)
	for _, d := range w.words {
		if s == d.word {
			return d.as, nil
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > maxDepthValue {
		return 0, fmt.Errorf("%s %q: want %s", w.key, s, w.want())
	}
	return n, nil
}

// want says what the setting takes (config check's message for a wrong value).
func (w wordDepth) want() string { return w.quoted() + " or an integer ≥ 0" }

// quoted is the words, quoted, joined by commas.
func (w wordDepth) quoted() string {
	q := make([]string, len(w.words))
	for i, d := range w.words {
		q[i] = strconv.Quote(d.word)
	}
	return strings.Join(q, ", ")
}

// format writes the word or the integer.
func (w wordDepth) format(n int) string {
	for _, d := range w.words {
		if n == d.as {
			return d.word
		}
	}
	return strconv.Itoa(n)
}

// Spec is [spec]: speculative decoding. It matters when [draft] path is set or a
// drafter plugin is named.
type Spec struct {
	Policy   string  `toml:"policy"`    // name of the depth-policy plugin (a key of Plugins)
	Depth    Depth   `toml:"depth"`     // DepthAuto, or a static depth that overrides Policy
	DraftMax int     `toml:"draft_max"` // largest depth ever used (llama.cpp --draft-max)
	MinConf  float64 `toml:"min_conf"`  // stop drafting below this draft probability (--draft-p-min); 0 = off
	// DraftMin is the least depth of a round that drafts (llama.cpp's --draft-min): the
	// host raises a policy's depth d in 1..DraftMin-1 to DraftMin; 0 = off.
	DraftMin int `toml:"draft_min"`
	// KeepCut keeps the token under min_conf as the round's last draft instead of
	// dropping it (pays on a GPU, where a verify row is nearly free).
	KeepCut bool `toml:"keep_cut"`
	// Fallback names the plugin used for the rest of a request when the policy plugin
	// fails (trap, timeout, bad result); "" = fail the request instead.
	Fallback string `toml:"fallback"`
	// Drafter names the drafter plugins (comma-separated, e.g. "ngram" or
	// "ngram,suffix") that draft besides (or, without a [draft] path, instead of) the
	// draft model; the depth policy picks each round's drafter. "" = the draft model only.
	Drafter string `toml:"drafter"`
	// DrafterOffers, with several drafters (a draft model and drafter plugins, or two
	// plugins), asks every drafter plugin for its proposal before the depth policy
	// decides each round and tells the policy how many tokens each offers
	// (sdk.RoundOutcome.Offered, ABI v1.4), so that a round goes to a drafter plugin
	// only when it has something to propose. Costs one plugin call per drafter plugin
	// a round (2-10 µs for the built-ins). false = call only the round's drafter.
	DrafterOffers bool `toml:"drafter_offers"`
	// MaxBatchRows bounds the verify rows of one step over all the sequences generating
	// together (a server's batched slots): while n sequences generate, each round's
	// depth is capped at max_batch_rows/n − 1, so speculation shrinks as the batch
	// grows instead of a step's rows growing with it. 0 = no bound (draft_max and
	// [server] batch_rows only).
	MaxBatchRows int `toml:"max_batch_rows"`
	// BatchDepth is every round's depth while two or more sequences generate in one
	// batch (see BatchDepth); default "auto".
	BatchDepth BatchDepth `toml:"batch_depth"`
}

// PolicySettings are the [spec] values the depth policy receives as params defaults
// (keys as in TOML); values left unset (keep_cut false, depth "auto") are left out.
func (s Spec) PolicySettings() map[string]any {
	m := map[string]any{"draft_max": s.DraftMax, "min_conf": s.MinConf}
	if s.KeepCut {
		m["keep_cut"] = true
	}
	if s.Depth != DepthAuto {
		m["depth"] = int(s.Depth)
	}
	return m
}

// DrafterNames splits Drafter into its names ("" gives none).
func (s Spec) DrafterNames() []string {
	var names []string
	for _, n := range strings.Split(s.Drafter, ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	return names
}

// Sampling is [sampling]: how tokens are chosen. Defaults follow llama.cpp.
type Sampling struct {
	// Sampler names the sampler plugin; "" = automatic: "greedy" when Temperature is 0,
	// else "sampling". See SamplerName.
	Sampler string `toml:"sampler"`
	// Penalty names the penalty plugin; "" = none.
	Penalty          string  `toml:"penalty"`
	Temperature      float64 `toml:"temperature"`       // 0 = greedy
	TopK             int     `toml:"top_k"`             // 0 = off
	TopP             float64 `toml:"top_p"`             // 1 = off
	MinP             float64 `toml:"min_p"`             // 0 = off
	RepeatPenalty    float64 `toml:"repeat_penalty"`    // 1 = off
	RepeatLastN      int     `toml:"repeat_last_n"`     // penalty window; 0 = off, -1 = whole context
	PresencePenalty  float64 `toml:"presence_penalty"`  // 0 = off
	FrequencyPenalty float64 `toml:"frequency_penalty"` // 0 = off
	Seed             int64   `toml:"seed"`              // -1 = random per request
	NPredict         int     `toml:"n_predict"`         // tokens to generate; -1 = until EOG or a full context
}

// SamplerName resolves Sampler: the configured name, or "greedy" / "sampling" by
// Temperature when Sampler is "".
func (s Sampling) SamplerName() string {
	switch {
	case s.Sampler != "":
		return s.Sampler
	case s.Temperature == 0:
		return "greedy"
	default:
		return "sampling"
	}
}

// SamplerParams are the [sampling] values the sampler plugin receives as params
// defaults (keys as in TOML).
func (s Sampling) SamplerParams() map[string]any {
	return map[string]any{
		"temperature": s.Temperature,
		"top_k":       s.TopK,
		"top_p":       s.TopP,
		"min_p":       s.MinP,
	}
}

// PenaltyParams are the [sampling] values the penalty plugin receives as params
// defaults (keys as in TOML).
func (s Sampling) PenaltyParams() map[string]any {
	return map[string]any{
		"repeat_penalty":    s.RepeatPenalty,
		"repeat_last_n":     s.RepeatLastN,
		"presence_penalty":  s.PresencePenalty,
		"frequency_penalty": s.FrequencyPenalty,
	}
}

// Plugin source kinds: the part of Plugin.Source before the colon.
const (
	SourceBuiltin = "builtin" // builtin:NAME, one of Builtins
	SourceFile    = "file"    // file:PATH.wasm, an ABI v1 WebAssembly module
	SourceProcess = "process" // process:PATH, a go-plugin executable (sdk/process)
)

// Plugin is [plugins.NAME]: one plugin the rest of the config refers to by NAME.
type Plugin struct {
	// Source says where the plugin comes from: "builtin:NAME", "file:PATH" or
	// "process:PATH". Relative paths are relative to the config file (ResolvePath).
	// May be omitted for a built-in name (it then defaults to "builtin:NAME").
	Source string `toml:"source"`
	// Params is the plugin's own table, free-form, handed to it as JSON at init over
	// the settings of its roles (Config.RoleSettings, plugins.Params). Values are TOML's: string, int64, float64, bool, time.Time,
	// []any and map[string]any.
	Params map[string]any `toml:"params"`
	// Timeout is the per-call deadline; 0 = the default for the source kind
	// (DefaultWasmTimeout, DefaultProcessTimeout).
	Timeout time.Duration `toml:"timeout"`
	// MemoryMB caps a WebAssembly plugin's linear memory; 0 = DefaultMemoryMB.
	MemoryMB int `toml:"memory_mb"`
	// Roles the plugin is used for (sdk role names); empty = whatever it declares.
	// When set, the config may only use it in those roles.
	Roles []string `toml:"roles"`
	// Given, for a plugin declared by a flag and not by a table, is that flag and its
	// value as the user wrote them ("--policy file:./x.wasm"): errors name it (Where).
	// Not a config key.
	Given string `toml:"-"`
}

// Where names the plugin declared as name the way the user wrote it, for errors: the
// flag and value that declared it (Given), else its [plugins.NAME] table.
func (p Plugin) Where(name string) string {
	if p.Given != "" {
		return p.Given
	}
	return "[plugins." + name + "]"
}

// Plugin defaults.
const (
	DefaultWasmTimeout    = time.Second     // builtin: and file: plugins (a safety net against runaway plugins, not a latency target: on a loaded 2-core machine scheduling stalls of a greedy call passed 100 ms)
	DefaultProcessTimeout = 2 * time.Second // process: plugins
	DefaultMemoryMB       = 64
)

// SourceKind splits Source into its kind and reference: ("builtin", "adaptive"),
// ("file", "./x.wasm"), ("process", "./bin/x"). It fails on a source without a known
// kind or with an empty reference.
func (p Plugin) SourceKind() (kind, ref string, err error) {
	kind, ref, ok := strings.Cut(p.Source, ":")
	if !ok || ref == "" {
		return "", "", fmt.Errorf("source %q: want \"builtin:NAME\", \"file:PATH\" or \"process:PATH\"", p.Source)
	}
	switch kind {
	case SourceBuiltin, SourceFile, SourceProcess:
		return kind, ref, nil
	}
	return "", "", fmt.Errorf("source %q: unknown kind %q, want builtin, file or process", p.Source, kind)
}

// Builtins lists the built-in plugins (plugins/builtin) and their roles. Default declares
// each as [plugins.NAME] source = "builtin:NAME".
var Builtins = map[string]sdk.Role{
	"adaptive": sdk.RolePolicy,
	"static":   sdk.RolePolicy,
	"ucb":      sdk.RolePolicy,
	"greedy":   sdk.RoleSampler,
	"sampling": sdk.RoleSampler,
	"penalty":  sdk.RolePenalty,
	"ngram":    sdk.RoleDrafter,
	"suffix":   sdk.RoleDrafter,
}

// BuiltinNames returns the names of Builtins, sorted.
func BuiltinNames() []string {
	names := make([]string, 0, len(Builtins))
	for n := range Builtins {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Server is [server]: `minfer serve`.
type Server struct {
	Addr         string        `toml:"addr"`          // listen address, host:port
	Parallel     int           `toml:"parallel"`      // sequences decoded concurrently (slots)
	Queue        int           `toml:"queue"`         // requests waiting for a slot; more get 503; 0 = none wait
	ReadTimeout  time.Duration `toml:"read_timeout"`  // reading a request; 0 = none
	WriteTimeout time.Duration `toml:"write_timeout"` // writing a whole response (streams too); 0 = none
	IdleTimeout  time.Duration `toml:"idle_timeout"`  // keep-alive connections; 0 = none
	// ReadHeaderTimeout bounds reading a request's headers (slowloris); 0 = none.
	ReadHeaderTimeout time.Duration `toml:"read_header_timeout"`
	// SendTimeout bounds writing one whole response, or one event of a stream, to a
	// client that reads slowly; 0 = none. A whole response is written after its slot
	// is free; a stream whose event cannot be written in time ends its generation.
	SendTimeout time.Duration `toml:"send_timeout"`
	// MaxConns caps the open connections; at the cap a new one displaces the
	// connection longest without a request in progress. 0 = no cap.
	MaxConns int `toml:"max_conns"`
	// BatchRows bounds the rows of one batched forward: the slots' concurrent forwards
	// run as one (continuous batching) up to this many rows; 0 = each slot's forwards
	// run alone. The backend's identity bound lowers it.
	BatchRows int `toml:"batch_rows"`
	// KVPoolMB is the KV memory of all the slots together, in MiB: their caches take
	// blocks of it as their sequences grow, so no slot reserves a whole context up
	// front; a request it cannot serve now gets 503 kv_pool_full. 0 = as much as
	// parallel whole contexts (never refused, taken as the sequences grow). On the CPU
	// the caches are paged and share prompt prefixes between slots (engine.Paging). A
	// backend that cannot page (CUDA) reserves each slot's context at start, as before.
	KVPoolMB int `toml:"kv_pool_mb"`
	// APIKeyEnv names the environment variable holding the API key clients must send as
	// "Authorization: Bearer KEY"; "" = no authentication.
	APIKeyEnv string `toml:"api_key_env"`
	// AllowPlugins lists the plugins a request may choose in its "minfer" field; ["*"] =
	// every declared plugin, [] = none (the config's choice always applies).
	AllowPlugins []string `toml:"allow_plugins"`
	// MaxTokens caps a request's max_tokens; 0 = no cap beyond the context.
	MaxTokens int `toml:"max_tokens"`
}

// Allowed reports whether a request may choose the plugin name.
func (s Server) Allowed(name string) bool {
	for _, a := range s.AllowPlugins {
		if a == "*" || a == name {
			return true
		}
	}
	return false
}

// Log levels accepted by Log.Level.
var LogLevels = []string{"debug", "info", "warn", "error"}

// Log is [log].
type Log struct {
	Level string `toml:"level"` // one of LogLevels
	// Trace is the path of a JSON-lines file recording every speculative round; "" = off.
	Trace string `toml:"trace"`
}

// Default returns the configuration used for every key minfer.toml leaves out. Each call
// returns a fresh value that the caller owns.
func Default() *Config {
	c := &Config{
		Model: Model{Device: DeviceAuto, Batch: 512, KV: KVF16, CPUOrder: CPUOrderAVX512},
		Draft: Draft{KV: KVF16},
		Spec:  Spec{Policy: "adaptive", Depth: DepthAuto, DraftMax: 16, DrafterOffers: true, BatchDepth: BatchDepthAuto},
		Sampling: Sampling{
			Temperature:   0.8,
			TopK:          40,
			TopP:          0.95,
			MinP:          0.05,
			RepeatPenalty: 1.0,
			RepeatLastN:   64,
			Seed:          -1,
			NPredict:      -1,
		},
		Plugins: map[string]Plugin{},
		Server: Server{
			Addr:         "127.0.0.1:8080",
			Parallel:     4,
			Queue:        64,
			ReadTimeout:  600 * time.Second,
			WriteTimeout: 600 * time.Second,
			IdleTimeout:  60 * time.Second,
			// Go's net/http has no header timeout by default; nginx's is 60 s,
			// Apache's mod_reqtimeout 20 s. 10 s is ample for any real client.
			ReadHeaderTimeout: 10 * time.Second,
			SendTimeout:       30 * time.Second,
			// Under a common open-file limit of 1024 with room for the model and
			// plugins; raise it with `ulimit -n`.
			MaxConns:     512,
			BatchRows:    64,
			AllowPlugins: []string{"*"},
		},
		Log: Log{Level: "info"},
	}
	for name, role := range Builtins {
		c.Plugins[name] = Plugin{
			Source:   SourceBuiltin + ":" + name,
			Params:   map[string]any{},
			Timeout:  DefaultWasmTimeout,
			MemoryMB: DefaultMemoryMB,
			Roles:    []string{string(role)},
		}
	}
	return c
}
