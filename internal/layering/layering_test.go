package layering

import (
	"errors"
	"fmt"
	"go/build"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/minfer/minfer/"

// stages is DESIGN.md's data flow, left to right: GGUF file → gguf → model (weights on
// a backend) → engine (forward with kv) → … → tokenizer text → CLI or server. A package
// written in parentheses belongs to the stage it is written with (backend before model:
// the model is built on it), and a package counts as its stage's (core/backend/cpu is
// a backend). cuda/ (kernels and driver, "nothing about models") stands before the
// backend that uses it.
var stages = [][]string{
	{"cuda/"},
	{"core/gguf"},
	{"core/backend"},
	{"core/model"},
	{"core/engine", "core/kv"},
	{"core/tokenizer"},
	{"core/server"},
}

// everywhere may be imported by any stage.
var everywhere = []string{"core/quant", "core/config", "sdk"}

// exceptions are imports the sentence does not allow and the tree keeps, with why
// (README.md, "Layering", says the same).
var exceptions = map[[2]string]string{
	{"core/model", "core/kv"}: "the forward (model.Forward) writes and reads the sequence's cache; " +
		"kv holds only the bookkeeping of backend.KV and imports nothing after the backend",
}

// throughEngine are the engine's parts that the packages after it reach only through
// the engine (engine.ErrContextFull, not kv.ErrFull): the server serves sessions, not
// caches or forwards.
var throughEngine = map[string][]string{"core/server": {"core/kv", "core/model"}}

// cliUsers are the packages that may import internal/cli, the command line's machinery
// (flag parsing, exit codes, terminals): the commands and the chat REPL they run. A
// package behind a command returns a usage mistake as internal/usage's Error instead.
var cliUsers = []string{"cmd", "internal/repl"}

// stageOf is the index of p's stage in stages (-1: none, e.g. cmd/, plugins/).
func stageOf(p string) int {
	for i, s := range stages {
		for _, prefix := range s {
			if under(p, prefix) {
				return i
			}
		}
	}
	return -1
}

// under reports whether package p is prefix or below it.
func under(p, prefix string) bool {
	prefix = strings.TrimSuffix(prefix, "/")
	return p == prefix || strings.HasPrefix(p, prefix+"/")
}

// imports lists every package of the module (its path inside the module) with its
// non-test imports (those of the module by their path inside it), as go list would
// for this platform. It reads the sources itself (go/build), so go test's cache knows
// the files the result depends on.
func imports(t *testing.T) map[string][]string {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string][]string{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		name := d.Name()
		if path != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
			return filepath.SkipDir
		}
		if path != root {
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // another module (e.g. a scaffolded plugin)
			}
		}
		pkg, err := build.Default.ImportDir(path, 0)
		if err != nil {
			var none *build.NoGoError
			if errors.As(err, &none) {
				return nil
			}
			return fmt.Errorf("%s: %w", path, err)
		}
		rel, _ := filepath.Rel(root, path)
		p := filepath.ToSlash(rel)
		m[p] = []string{}
		for _, imp := range pkg.Imports {
			m[p] = append(m[p], strings.TrimPrefix(imp, module))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestLayering: every stage imports only its own stage and the stages to its left
// (and quant, config, sdk); quant, config and sdk import no stage; nothing in core,
// cuda/ or sdk imports plugins/, cmd/ or examples/; sdk itself is standard library only;
// only cliUsers import internal/cli.
func TestLayering(t *testing.T) {
	all := imports(t)
	if len(all) < 10 {
		t.Fatalf("go list found %d packages", len(all))
	}
	for p, imps := range all {
		from := stageOf(p)
		lower := from >= 0 || isEverywhere(p)
		for _, imp := range imps {
			if !hasKey(all, imp) { // outside the module
				if p == "sdk" && strings.Contains(strings.SplitN(imp, "/", 2)[0], ".") {
					t.Errorf("sdk imports %s: sdk is standard library only", imp)
				}
				continue
			}
			if lower && (under(imp, "plugins") || under(imp, "cmd") || under(imp, "examples")) {
				t.Errorf("%s imports %s: nothing in core, cuda/ or sdk imports plugins/, cmd/ or examples/", p, imp)
			}
			if under(imp, "internal/cli") && !slices.ContainsFunc(cliUsers, func(x string) bool { return under(p, x) }) {
				t.Errorf("%s imports %s: only %v use the command line's machinery (return a usage mistake as internal/usage.Error)", p, imp, cliUsers)
			}
			if slices.ContainsFunc(throughEngine[p], func(x string) bool { return under(imp, x) }) {
				t.Errorf("%s imports %s: it reaches the engine's parts through core/engine", p, imp)
			}
			to := stageOf(imp)
			if why, ok := exceptions[[2]string{p, imp}]; ok {
				t.Logf("%s imports %s: an exception (%s)", p, imp, why)
				continue
			}
			switch {
			case from >= 0 && to > from:
				t.Errorf("%s imports %s, which stands to its right in DESIGN.md's data flow", p, imp)
			case isEverywhere(p) && to >= 0:
				t.Errorf("%s imports %s: quant, config and sdk import no stage", p, imp)
			}
		}
	}
	for pair := range exceptions {
		if !slices.Contains(all[pair[0]], pair[1]) {
			t.Errorf("exception %s → %s is no longer needed: remove it (and its README line)", pair[0], pair[1])
		}
	}
}

func hasKey(m map[string][]string, k string) bool { _, ok := m[k]; return ok }

func isEverywhere(p string) bool {
	for _, e := range everywhere {
		if under(p, e) {
			return true
		}
	}
	return false
}
