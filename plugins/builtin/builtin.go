// Package builtin holds the plugins minfer ships: the depth policies adaptive (the
// default), ucb and static, the samplers greedy and sampling, the penalty window, and
// the drafters ngram and suffix (one file per proposer).
//
// The same Go sources are used twice: natively (this package, importable by tests and
// by anything that wants a plugin without a WebAssembly host) and compiled with
// GOOS=wasip1 into builtin.wasm (see ./wasm), the module the engine actually runs for
// "builtin:NAME" sources. `go generate ./plugins/builtin` rebuilds it and
// scripts/check-generated.sh checks it is current.
//
// Params arrive as a JSON object (the plugin's [plugins.NAME] params table merged over
// the settings of its role that it declares it reads, Plugin.Reads; see plugins.Params).
// Unknown keys are errors that name the key.
package builtin

//go:generate sh -c "GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -buildvcs=false -ldflags=-buildid= -o builtin.wasm ./wasm && sha256sum builtin.wasm > builtin.wasm.sha256"

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/minfer/minfer/internal/jsonkind"
	"github.com/minfer/minfer/sdk"
)

// WASM is builtin.wasm: every plugin of Plugins in one ABI v1 module.
//
//go:embed builtin.wasm
var WASM []byte

//go:embed builtin.wasm.sha256
var wasmSum string

// SHA256 is the hex checksum recorded for WASM when it was generated; the host checks
// the embedded bytes against it at load.
func SHA256() string {
	sum, _, _ := strings.Cut(wasmSum, " ")
	return sum
}

// Version is the version every built-in plugin reports.
const Version = "1.0.0"

// Plugin is one built-in: its info and the constructor for its role (exactly one of
// the New functions is set). Each call of a constructor returns a fresh instance.
type Plugin struct {
	Info sdk.Info
	// Reads are the settings of its role (config.Config.RoleSettings keys, e.g. [spec]
	// draft_max) that it reads, some of its Info.Params; the host hands it no other
	// setting (plugins.Params).
	Reads      []string
	NewPolicy  func(params []byte) (sdk.DepthPolicy, error)
	NewPenalty func(params []byte) (sdk.Penalty, error)
	NewSampler func(params []byte) (sdk.Sampler, error)
	NewDrafter func(params []byte) (sdk.Drafter, error)
}

// Plugins lists the built-ins in a fixed order. Each declares its params (sdk.Info
// Params, ABI v1.3: every key its params object takes, the order of its params struct;
// TestDeclaredParams holds the two equal), so plugin list and plugin check show them and
// the host refuses a [plugins.NAME] params key outside them, by name, at load.
var Plugins = []Plugin{
	{Info: info("adaptive", sdk.RolePolicy, 0, "draft_max", "min_conf", "start", "hysteresis", "window", "forget",
		"relax", "prior_mean", "prior_strength", "optimism", "carry", "park_margin", "probe", "auto_cut", "calibrate",
		"calibrate_shift", "keep_cut", "batch_table"),
		Reads:     []string{"draft_max", "min_conf", "keep_cut"},
		NewPolicy: func(p []byte) (sdk.DepthPolicy, error) { return NewAdaptive(p) }},
	{Info: info("ucb", sdk.RolePolicy, 0, "draft_max", "min_conf", "explore", "discount"),
		Reads:     []string{"draft_max", "min_conf"},
		NewPolicy: func(p []byte) (sdk.DepthPolicy, error) { return NewUCB(p) }},
	{Info: info("static", sdk.RolePolicy, 0, "depth", "min_conf", "keep_cut", "draft_max"),
		Reads:     []string{"depth", "draft_max", "min_conf", "keep_cut"},
		NewPolicy: func(p []byte) (sdk.DepthPolicy, error) { return NewStatic(p) }},
	{Info: info("greedy", sdk.RoleSampler, 1, "temperature", "top_k", "top_p", "min_p"),
		NewSampler: func(p []byte) (sdk.Sampler, error) { return NewGreedy(p) }},
	{Info: info("sampling", sdk.RoleSampler, 40, "temperature", "top_k", "top_p", "min_p"),
		Reads:      []string{"temperature", "top_k", "top_p", "min_p"},
		NewSampler: func(p []byte) (sdk.Sampler, error) { return NewSampling(p) }},
	{Info: info("penalty", sdk.RolePenalty, 0, "repeat_penalty", "repeat_last_n", "presence_penalty", "frequency_penalty"),
		Reads:      []string{"repeat_penalty", "repeat_last_n", "presence_penalty", "frequency_penalty"},
		NewPenalty: func(p []byte) (sdk.Penalty, error) { return NewPenalty(p) }},
	{Info: info("ngram", sdk.RoleDrafter, 0, "n_min", "n_max", "decay"),
		NewDrafter: func(p []byte) (sdk.Drafter, error) { return NewNgram(p) }},
	{Info: info("suffix", sdk.RoleDrafter, 0, "depth", "max_pattern", "min_prob", "factor", "offset", "max_tokens"),
		NewDrafter: func(p []byte) (sdk.Drafter, error) { return NewSuffix(p) }},
}

func info(name string, role sdk.Role, topK int, params ...string) sdk.Info {
	return sdk.Info{Name: name, Version: Version, Roles: []sdk.Role{role}, Needs: sdk.Needs{TopK: topK},
		Params: params, ParamsDeclared: true}
}

// Lookup finds a built-in by name.
func Lookup(name string) (Plugin, bool) {
	for _, p := range Plugins {
		if p.Info.Name == name {
			return p, true
		}
	}
	return Plugin{}, false
}

// paramsDecoded, set only by TestDeclaredParams, sees the params struct of each
// decodeParams call: the test holds each built-in's declared params equal to it.
var paramsDecoded func(name string, dst any)

// decodeParams decodes a JSON params object into dst (a pointer to a struct holding
// the defaults), rejecting unknown keys.
func decodeParams(name string, params []byte, dst any) error {
	if paramsDecoded != nil {
		paramsDecoded(name, dst)
	}
	if len(bytes.TrimSpace(params)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(params))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" { // json's own words name Go types ("Go struct field .depth of type int")
			return fmt.Errorf("%s: params: %s: got JSON %s, want %s", name, te.Field, te.Value, jsonkind.Of(te.Type))
		}
		return fmt.Errorf("%s: params: %w", name, err)
	}
	return nil
}

func checkRange(name, key string, v, lo, hi float64) error {
	if !(v >= lo && v <= hi) {
		return fmt.Errorf("%s: params: %s = %v, want a value in [%v, %v]", name, key, v, lo, hi)
	}
	return nil
}

// rng is splitmix64: tiny, and identical natively and in WebAssembly.
type rng struct{ s uint64 }

func newRNG(seed, step uint64) rng {
	r := rng{s: seed ^ 0x6a09e667f3bcc909}
	r.s ^= r.next() ^ step*0xd1342543de82ef95
	return r
}

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// float returns a uniform value in [0, 1).
func (r *rng) float() float64 { return float64(r.next()>>11) / (1 << 53) }

func clampInt(v, lo, hi int) int { return max(lo, min(v, hi)) }
