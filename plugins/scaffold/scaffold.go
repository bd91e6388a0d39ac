// Package scaffold writes the starting files of a new plugin (`minfer plugin new`): a Go
// module with one policy, sampler or penalty built for GOOS=wasip1, and its README.
package scaffold

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"text/template"

	"github.com/minfer/minfer/sdk"
)

// ScaffoldOptions configures Scaffold.
type ScaffoldOptions struct {
	Role sdk.Role
	Dir  string // created; must not exist or be empty
	Name string // plugin name ([a-z0-9._-]); "" = the directory's base name, cleaned
	// Module is the Go module path of the new plugin ("" = example.com/NAME). When Dir
	// lies inside a checkout of minfer itself no go.mod is written.
	Module string
	// MinferDir is the minfer checkout the go.mod of a plugin outside the checkout
	// points to with a replace directive: github.com/minfer/minfer is not published on
	// the module proxy, so outside the checkout it is required.
	MinferDir string
}

// Scaffold writes a minimal plugin of the given role that builds with
// GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o NAME.wasm . as it is, with no
// go mod tidy and no network: main.go, README.md, .gitignore (the .wasm output) and,
// outside the minfer module, a go.mod in the form go mod tidy writes (sdk and
// sdk/guest import only the standard library, so no go.sum is needed). It returns the
// files written.
func Scaffold(o ScaffoldOptions) ([]string, error) {
	tmpl, ok := scaffolds[o.Role]
	if !ok {
		return nil, fmt.Errorf("scaffold: unknown role %q (want policy, sampler, penalty or drafter)", o.Role)
	}
	if o.Name == "" {
		o.Name = cleanName(filepath.Base(filepath.Clean(o.Dir)))
	}
	if o.Name == "" || cleanName(o.Name) != o.Name {
		return nil, fmt.Errorf("scaffold: plugin name %q: want lower-case letters, digits, '.', '_' or '-'", o.Name)
	}
	if entries, err := os.ReadDir(o.Dir); err == nil && len(entries) > 0 {
		return nil, fmt.Errorf("scaffold: %s exists and is not empty", o.Dir)
	}
	if o.Module == "" {
		o.Module = "example.com/" + o.Name
	}
	if err := checkModulePath(o.Module); err != nil {
		return nil, fmt.Errorf("scaffold: --module %q: %w", o.Module, err)
	}
	data := map[string]string{"Name": o.Name, "Role": string(o.Role), "Module": o.Module,
		"Ident": ident(o.Name), "ABI": sdk.ExportABI}
	files := map[string]string{"main.go": tmpl, "README.md": scaffoldReadme, ".gitignore": "/{{.Name}}.wasm\n"}
	if !insideMinfer(o.Dir) {
		if o.MinferDir == "" {
			return nil, fmt.Errorf("scaffold: %s is outside a minfer checkout and no checkout is known: give --minfer PATH (github.com/minfer/minfer is not published, so the go.mod points at a local checkout)", o.Dir)
		}
		abs, err := filepath.Abs(o.MinferDir)
		if err != nil {
			return nil, fmt.Errorf("scaffold: %w", err)
		}
		goVersion, err := MinferCheckout(abs)
		if err != nil {
			return nil, fmt.Errorf("scaffold: --minfer %s: %w", o.MinferDir, err)
		}
		data["Replace"], data["Go"] = abs, goVersion
		files["go.mod"] = scaffoldGoMod
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("scaffold: %w", err)
	}
	var written []string
	for _, name := range []string{"go.mod", "main.go", "README.md", ".gitignore"} {
		src, ok := files[name]
		if !ok {
			continue
		}
		var buf bytes.Buffer
		if err := template.Must(template.New(name).Parse(src)).Execute(&buf, data); err != nil {
			return written, fmt.Errorf("BUG: scaffold template %s: %w", name, err)
		}
		p := filepath.Join(o.Dir, name)
		if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
			return written, fmt.Errorf("scaffold: %w", err)
		}
		written = append(written, p)
	}
	return written, nil
}

// MinferCheckout reports whether dir is the root of a minfer checkout (a go.mod of
// module github.com/minfer/minfer) and returns its go directive's version.
func MinferCheckout(dir string) (goVersion string, err error) {
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return "", fmt.Errorf("not a minfer checkout: %w", err)
	}
	if !bytes.HasPrefix(b, []byte("module github.com/minfer/minfer\n")) {
		return "", fmt.Errorf("not a minfer checkout: %s is not the go.mod of github.com/minfer/minfer", filepath.Join(dir, "go.mod"))
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "go "); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("%s has no go directive", filepath.Join(dir, "go.mod"))
}

var nonName = regexp.MustCompile(`[^a-z0-9._-]+`)

func cleanName(s string) string {
	s = nonName.ReplaceAllString(strings.ToLower(s), "-")
	s = strings.Trim(s, "-.")
	if len(s) > sdk.MaxNameLen {
		s = s[:sdk.MaxNameLen]
	}
	return s
}

// ident turns a plugin name into a Go identifier.
func ident(name string) string {
	var b strings.Builder
	up := true
	for _, r := range name {
		if r == '-' || r == '.' || r == '_' {
			up = true
			continue
		}
		if up {
			r = []rune(strings.ToUpper(string(r)))[0]
			up = false
		}
		b.WriteRune(r)
	}
	s := b.String()
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		s = "P" + s
	}
	return s
}

// insideMinfer reports whether dir lies in the module github.com/minfer/minfer.
func insideMinfer(dir string) bool {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	for d := abs; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil {
			return bytes.HasPrefix(b, []byte("module github.com/minfer/minfer\n"))
		}
		if filepath.Dir(d) == d {
			return false
		}
	}
}

var scaffolds = map[sdk.Role]string{
	sdk.RolePolicy:  scaffoldPolicy,
	sdk.RolePenalty: scaffoldPenalty,
	sdk.RoleSampler: scaffoldSampler,
	sdk.RoleDrafter: scaffoldDrafter,
}

// scaffoldGoMod is written as go mod tidy would write it, so that go build accepts it
// as it is (v0.0.0 is never fetched: the replace directive points at the checkout).
const scaffoldGoMod = `module {{.Module}}

go {{.Go}}

require github.com/minfer/minfer v0.0.0

replace github.com/minfer/minfer => {{.Replace}}
`

const scaffoldHeader = `// Command {{.Name}} is a minfer {{.Role}} plugin (ABI v1, see sdk/ABI.md in minfer).
//
// Build:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o {{.Name}}.wasm .
//
// Use it from minfer.toml:
//
//	[plugins.{{.Name}}]
//	source = "file:./{{.Name}}.wasm"
//	params = { }
package main
`

const scaffoldPolicy = scaffoldHeader + `
import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/minfer/minfer/sdk"
	"github.com/minfer/minfer/sdk/guest"
)

// {{.Ident}} drafts a fixed depth, capped by the engine's bound.
type {{.Ident}} struct {
	Depth int ` + "`json:\"depth\"`" + `
}

// new{{.Ident}} reads the params: the keys init declares (guest.DeclareParams), so
// the host merges in only the role settings among them ([spec] depth) and refuses a
// [plugins.{{.Name}}] params key outside them, naming it — a misspelt "dpeth" fails at
// start instead of being ignored. Add a key here and to DeclareParams together. The
// host applies [spec] min_conf, keep_cut and draft_min to every decision itself
// (sdk/ABI.md), so this policy need not.
func new{{.Ident}}(params []byte) (sdk.DepthPolicy, error) {
	p := &{{.Ident}}{Depth: 4}
	if err := json.Unmarshal(params, p); err != nil {
		return nil, fmt.Errorf("params: %w", err)
	}
	if p.Depth < 0 {
		return nil, fmt.Errorf("params: depth %d < 0", p.Depth)
	}
	return p, nil
}

// NextDepth is called before every round with the previous round's outcome.
func (p *{{.Ident}}) NextDepth(_ context.Context, last sdk.RoundOutcome) (sdk.DepthDecision, error) {
	d := p.Depth
	if last.Round >= 0 {
		d = min(d, last.MaxDepth)
	}
	return sdk.DepthDecision{Depth: d}, nil
}

func init() {
	guest.RegisterPolicy("{{.Name}}", "0.1.0", new{{.Ident}})
	guest.DeclareParams("{{.Name}}", "depth") // every key new{{.Ident}} reads
}

func main() {}
`

const scaffoldSampler = scaffoldHeader + `
import (
	"context"

	"github.com/minfer/minfer/sdk"
	"github.com/minfer/minfer/sdk/guest"
)

// {{.Ident}} is greedy: it asks for the argmax of each row (TopK 1), accepts the
// longest draft prefix that matches and emits the next argmax.
type {{.Ident}} struct{}

func new{{.Ident}}(params []byte) (sdk.Sampler, error) { return {{.Ident}}{}, nil }

func ({{.Ident}}) Needs() sdk.Needs { return sdk.Needs{TopK: 1} }

func ({{.Ident}}) Sample(_ context.Context, r *sdk.SampleRound) (sdk.SampleResult, error) {
	for i := range r.Draft {
		if r.Draft[i] != r.Rows[i].IDs[0] {
			return sdk.SampleResult{Accepted: i, Next: r.Rows[i].IDs[0]}, nil
		}
	}
	return sdk.SampleResult{Accepted: len(r.Draft), Next: r.Rows[len(r.Draft)].IDs[0]}, nil
}

func init() {
	guest.RegisterSampler("{{.Name}}", "0.1.0", sdk.Needs{TopK: 1}, new{{.Ident}})
	// It reads no params: the host merges in no setting (temperature, …) and refuses
	// any [plugins.{{.Name}}] params key. List the keys here once it reads some.
	guest.DeclareParams("{{.Name}}")
}

func main() {}
`

const scaffoldDrafter = scaffoldHeader + `
import (
	"context"

	"github.com/minfer/minfer/sdk"
	"github.com/minfer/minfer/sdk/guest"
)

// {{.Ident}} proposes the tokens that followed the latest earlier occurrence of the
// sequence's last token (prompt lookup with n = 1). It keeps the sequence itself: each
// call tells it only the tokens appended since the last one. Use it with [spec]
// drafter = "{{.Name}}".
type {{.Ident}} struct {
	seq []int32
}

func new{{.Ident}}(params []byte) (sdk.Drafter, error) { return &{{.Ident}}{}, nil }

func (d *{{.Ident}}) Draft(_ context.Context, q *sdk.DraftRequest) (sdk.DraftResult, error) {
	d.seq = append(d.seq, q.Appended...)
	var res sdk.DraftResult
	n := len(d.seq)
	for i := n - 2; i >= 0 && n > 0; i-- {
		if d.seq[i] == d.seq[n-1] {
			for j := i + 1; j < n && len(res.Tokens) < q.MaxDepth; j++ {
				res.Tokens, res.Conf = append(res.Tokens, d.seq[j]), append(res.Conf, 0.5)
			}
			break
		}
	}
	return res, nil
}

func init() {
	guest.RegisterDrafter("{{.Name}}", "0.1.0", new{{.Ident}})
	// It reads no params: any [plugins.{{.Name}}] params key is refused at start. List
	// the keys here once it reads some.
	guest.DeclareParams("{{.Name}}")
}

func main() {}
`

const scaffoldPenalty = scaffoldHeader + `
import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/minfer/minfer/sdk"
	"github.com/minfer/minfer/sdk/guest"
)

// {{.Ident}} subtracts a fixed amount from the logit of every token seen in the last
// window tokens.
type {{.Ident}} struct {
	Amount float32 ` + "`json:\"amount\"`" + `
	Last   int     ` + "`json:\"last_n\"`" + `
}

// new{{.Ident}} reads the params: the keys init declares (guest.DeclareParams), so a
// misspelt [plugins.{{.Name}}] params key fails at start, naming it.
func new{{.Ident}}(params []byte) (sdk.Penalty, error) {
	p := &{{.Ident}}{Amount: 0.5, Last: 64}
	if err := json.Unmarshal(params, p); err != nil {
		return nil, fmt.Errorf("params: %w", err)
	}
	if p.Last < 0 {
		return nil, fmt.Errorf("params: last_n %d < 0", p.Last)
	}
	return p, nil
}

func (p *{{.Ident}}) Window() int { return p.Last }

// Apply rewrites each row's logits of the tokens in its window (IDs are those tokens).
func (p *{{.Ident}}) Apply(_ context.Context, rows []sdk.PenaltyRow) error {
	for i := range rows {
		for j := range rows[i].Logits {
			rows[i].Logits[j] -= p.Amount
		}
	}
	return nil
}

func init() {
	guest.RegisterPenalty("{{.Name}}", "0.1.0", new{{.Ident}})
	guest.DeclareParams("{{.Name}}", "amount", "last_n") // every key new{{.Ident}} reads
}

func main() {}
`

const scaffoldReadme = `# {{.Name}}

A minfer {{.Role}} plugin (ABI v1). Edit main.go, then, in this directory:

    GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o {{.Name}}.wasm .
    minfer plugin check {{.Name}}.wasm

(` + "`go run ./cmd/minfer`" + ` in the minfer checkout stands for ` + "`minfer`" + ` where it is not installed.)
{{if .Replace}}go.mod points github.com/minfer/minfer at the checkout {{.Replace}} (the module
is not published); where the checkout moves, change that replace line.
{{end}}
Then declare it in minfer.toml:

    [plugins.{{.Name}}]
    source = "file:./{{.Name}}.wasm"
    params = { }

Params from that table arrive as a JSON object at init (see new{{.Ident}} in main.go).
init declares the keys the plugin reads (guest.DeclareParams, ABI v1.3): a key of the
table outside them is refused at start, naming it, and ` + "`minfer plugin list`" + ` and
` + "`minfer plugin check`" + ` show them. Add a key to new{{.Ident}} and to DeclareParams together.
Register in init(), not main(): a -buildmode=c-shared module never runs main.
`

var modulePathElem = regexp.MustCompile(`^[A-Za-z0-9_~-][A-Za-z0-9._~-]*$`)

// checkModulePath refuses a module path go would refuse in the go.mod the scaffold
// writes (before, "not a module!" was written and the printed build command failed):
// slash-separated elements of ASCII letters, digits and "._~-", none empty, none
// starting or ending with a dot.
func checkModulePath(p string) error {
	for _, e := range strings.Split(p, "/") {
		if !modulePathElem.MatchString(e) || strings.HasSuffix(e, ".") {
			return fmt.Errorf("want a Go module path: elements of letters, digits and ._~- separated by /, such as example.com/mypolicy")
		}
	}
	return nil
}
