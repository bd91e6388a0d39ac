package stack

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/minfer/minfer/core/config"
	"github.com/minfer/minfer/core/engine"
	"github.com/minfer/minfer/plugins"
)

// Plugins is the plugin registry of a command: loaded once, an instance per request,
// with the command's tracer.
type Plugins struct {
	reg *plugins.Registry
	log io.Writer // where a [spec] fallback taking over is reported
	// tracer records every speculative round ([log] trace, --trace); nil = off.
	tracer    *plugins.Tracer
	traceFile *os.File
}

// NewPlugins loads cfg's plugins and opens its trace file.
func NewPlugins(ctx context.Context, cfg *config.Config, log io.Writer) (*Plugins, error) {
	reg, err := plugins.NewRegistry(ctx, cfg.Plugins, log, plugins.WithDir(cfg.Dir))
	if err != nil {
		return nil, err
	}
	p := &Plugins{reg: reg, log: log}
	if cfg.Log.Trace != "" {
		f, err := os.Create(cfg.ResolvePath(cfg.Log.Trace))
		if err != nil {
			reg.Close()
			return nil, fmt.Errorf("trace: %w", err)
		}
		p.traceFile, p.tracer = f, plugins.NewTracer(f)
	}
	return p, nil
}

// Close closes the registry and the trace file (a trace write error is reported).
func (p *Plugins) Close() {
	p.reg.Close()
	if p.traceFile != nil {
		if err := p.tracer.Err(); err != nil {
			fmt.Fprintf(p.log, "minfer: trace %s: %v\n", p.traceFile.Name(), err)
		}
		p.traceFile.Close()
	}
}

// Roles starts one request's plugin instances (plugins.Registry.Roles), with the
// command's tracer.
func (p *Plugins) Roles(ctx context.Context, cfg *config.Config, spec bool) (*plugins.Roles, error) {
	return p.reg.Roles(ctx, cfg, plugins.RolesOptions{Spec: spec, Tracer: p.tracer})
}

// EngineDrafters are the request's drafter plugins, named, as the engine takes them.
func EngineDrafters(r *plugins.Roles) []engine.Drafter {
	var ds []engine.Drafter
	for i, d := range r.Drafters {
		ds = append(ds, engine.Drafter{Name: r.DrafterNames[i], Drafter: d})
	}
	return ds
}
