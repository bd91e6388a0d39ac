package jinja

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// hostileTemplates are templates that, before the limits, killed the process (a
// stack overflow or out of memory is fatal in Go) or rendered for minutes. Each must
// now end in a *LimitError or a parse error.
var hostileTemplates = []struct{ name, src string }{
	{"recursive macro", `{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}`},
	{"mutual recursion", `{% macro a() %}{{ b() }}{% endmacro %}{% macro b() %}{{ a() }}{% endmacro %}{{ a() }}`},
	{"range 1e9", `{% for i in range(1000000000) %}{% endfor %}`},
	{"range list 1e9", `{{ range(1000000000) | length }}`},
	{"string doubling", `{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s | length }}`},
	{"string repeat", `{{ 'x' * 100000000000 }}`},
	{"nested loops", `{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}`},
	{"output flood", `{% for i in range(1000000) %}{{ 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' }}{% endfor %}`},
	{"self-holding list printed", `{% set l = [1] %}{% set _ = l.append(l) %}{{ l }}`},
	{"self-holding list as json", `{% set l = [1] %}{% set _ = l.append(l) %}{{ l | tojson }}`},
	{"self-holding list compared", `{% set l = [1] %}{% set _ = l.append(l) %}{% set m = [1] %}{% set _ = m.append(m) %}{{ l == m }}`},
	{"shared list doubling printed", `{% set ns = namespace(x=[1]) %}{% for i in range(60) %}{% set ns.x = [ns.x, ns.x] %}{% endfor %}{{ ns.x }}`},
	{"replace blow-up", `{% set ns = namespace(s='a' * 1000) %}{% for i in range(10) %}{% set ns.s = ns.s | replace('a', 'aaaaaaaaaa') %}{% endfor %}{{ ns.s | length }}`},
	{"join blow-up", `{% set ns = namespace(l=['x' * 1000000]) %}{% for i in range(30) %}{% set ns.l = ns.l + ns.l %}{% endfor %}{{ ns.l | join('') | length }}`},
	{"indent blow-up", `{{ ('a\n' * 1000) | indent(100000000) | length }}`},
	{"deep parentheses", `{{ ` + strings.Repeat("(", 100000) + `1` + strings.Repeat(")", 100000) + ` }}`},
	{"deep not", `{{ ` + strings.Repeat("not ", 100000) + `1 }}`},
	{"deep blocks", strings.Repeat(`{% if true %}`, 100000) + strings.Repeat(`{% endif %}`, 100000)},
}

func TestHostileTemplatesEndInErrors(t *testing.T) {
	for _, tc := range hostileTemplates {
		t.Run(tc.name, func(t *testing.T) {
			tp, err := Compile(tc.src)
			if err != nil {
				if !strings.Contains(err.Error(), "nested deeper") {
					t.Fatalf("compile: got %v, want a nesting error or success", err)
				}
				return
			}
			out, err := tp.RenderContext(context.Background(), nil, Limits{})
			var le *LimitError
			if !errors.As(err, &le) {
				t.Fatalf("got output of %d bytes and error %v, want a *LimitError", len(out), err)
			}
		})
	}
}

func TestLimitsEachStopARender(t *testing.T) {
	loop := `{% for i in range(100000) %}{{ 'abcdefgh' }}{% endfor %}`
	for _, tc := range []struct {
		name  string
		src   string
		lim   Limits
		limit string
	}{
		{"steps", loop, Limits{MaxSteps: 1000}, "steps"},
		{"output", loop, Limits{MaxOutput: 1000}, "output bytes"},
		{"depth", `{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}`, Limits{MaxDepth: 50}, "nesting depth"},
		{"alloc", `{% set ns = namespace(s='') %}{% for i in range(100000) %}{% set ns.s = ns.s ~ 'abcdefgh' %}{% endfor %}`, Limits{MaxAlloc: 1 << 20}, "allocated bytes"},
		{"time", `{% for i in range(1000000) %}{% for j in range(1000000) %}{% endfor %}{% endfor %}`, Limits{MaxSteps: 1 << 62, Timeout: 20 * time.Millisecond}, "time (ms)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp, err := Compile(tc.src)
			if err != nil {
				t.Fatal(err)
			}
			_, err = tp.RenderContext(context.Background(), nil, tc.lim)
			var le *LimitError
			if !errors.As(err, &le) || le.Limit != tc.limit {
				t.Fatalf("got %v, want the %q limit", err, tc.limit)
			}
		})
	}
}

func TestRenderHonoursContext(t *testing.T) {
	tp, err := Compile(`{% for i in range(1000000) %}{% for j in range(1000000) %}{% endfor %}{% endfor %}`)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(10 * time.Millisecond); cancel() }()
	_, err = tp.RenderContext(ctx, nil, Limits{MaxSteps: 1 << 62, Timeout: time.Hour})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

func TestBoundedTojsonIndent(t *testing.T) {
	tp, err := Compile(`{{ x | tojson(indent=2) }}|{{ x | tojson }}|{{ [] | tojson(indent=2) }}`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tp.Render(map[string]any{"x": map[string]any{"b": []any{1, "<a>"}, "a": true}})
	if err != nil {
		t.Fatal(err)
	}
	// Python: json.dumps({"a": True, "b": [1, "<a>"]}, indent=2) (keys sorted by FromGoValue).
	want := "{\n  \"a\": true,\n  \"b\": [\n    1,\n    \"<a>\"\n  ]\n}|{\"a\": true, \"b\": [1, \"<a>\"]}|[]"
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
