package config

import (
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
)

// MissingFiles lists the files c names (models, plugin modules and executables) that
// cannot be opened now: the file itself is valid, but a run with it would fail there.
func (c *Config) MissingFiles() []string {
	var out []string
	check := func(what, path string) {
		if path == "" {
			return
		}
		if st, err := os.Stat(c.ResolvePath(path)); err != nil {
			out = append(out, fmt.Sprintf("%s: %v", what, err))
		} else if st.IsDir() {
			out = append(out, fmt.Sprintf("%s: %s is a directory", what, c.ResolvePath(path)))
		}
	}
	check("[model] path", c.Model.Path)
	check("[draft] path", c.Draft.Path)
	for _, name := range slices.Sorted(maps.Keys(c.Plugins)) {
		kind, ref, err := c.Plugins[name].SourceKind()
		if err == nil && (kind == SourceFile || kind == SourceProcess && strings.ContainsRune(ref, os.PathSeparator)) {
			check(fmt.Sprintf("[plugins.%s] source", name), ref)
		}
	}
	return out
}

// WriteSummary prints what c configures (minfer config check), one line per section.
func (c *Config) WriteSummary(w io.Writer) {
	model := "embedded default model"
	if c.Model.Path != "" {
		model = c.ResolvePath(c.Model.Path)
	}
	ctxLen := "ctx from model"
	if c.Model.Ctx > 0 {
		ctxLen = fmt.Sprintf("ctx %d", c.Model.Ctx)
	}
	fmt.Fprintf(w, "  model:    %s on %s, %s, kv %s\n", model, c.Model.Device, ctxLen, c.Model.KV)
	if c.Draft.Path == "" {
		fmt.Fprintln(w, "  draft:    none (plain decoding)")
	} else {
		dev := c.Draft.Device
		if dev == "" {
			dev = c.Model.Device
		}
		fmt.Fprintf(w, "  draft:    %s on %s, kv %s\n", c.ResolvePath(c.Draft.Path), dev, c.Draft.KV)
	}
	fmt.Fprintf(w, "  spec:     policy %s, depth %s, draft_max %d", c.Spec.PolicyName(), c.Spec.Depth, c.Spec.DraftMax)
	if c.Spec.Drafter != "" {
		fmt.Fprintf(w, ", drafter %s", c.Spec.Drafter)
	}
	fmt.Fprintf(w, ", batch_depth %s", c.Spec.BatchDepth)
	if c.Draft.Path == "" && c.Spec.Drafter == "" {
		fmt.Fprint(w, " (unused without a draft or a drafter)")
	}
	fmt.Fprintln(w)
	s := c.Sampling
	penalty := "none"
	if s.Penalty != "" {
		penalty = s.Penalty
	}
	seed := "random"
	if s.Seed >= 0 {
		seed = fmt.Sprint(s.Seed)
	}
	fmt.Fprintf(w, "  sampling: sampler %s (temperature %g, top_k %d, top_p %g, min_p %g), penalty %s, seed %s\n",
		s.SamplerName(), s.Temperature, s.TopK, s.TopP, s.MinP, penalty, seed)
	var plugins []string
	for _, name := range slices.Sorted(maps.Keys(c.Plugins)) {
		plugins = append(plugins, name+"="+c.Plugins[name].Source)
	}
	fmt.Fprintf(w, "  plugins:  %s\n", strings.Join(plugins, " "))
	auth := "no auth"
	if c.Server.APIKeyEnv != "" {
		auth = "API key from $" + c.Server.APIKeyEnv
	}
	fmt.Fprintf(w, "  server:   %s, parallel %d, queue %d, %s\n", c.Server.Addr, c.Server.Parallel, c.Server.Queue, auth)
}
