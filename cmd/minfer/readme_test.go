package main

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/minfer/minfer/core/config"
)

// readmeSection returns the text of README.md's "## title" section (to the next "## ").
func readmeSection(t *testing.T, title string) string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n## "+title+"\n")
	if !ok {
		t.Fatalf("README.md has no section %q", title)
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	return sec
}

// commandFlags parses the names of the flags `minfer name --help` lists.
func commandFlags(t *testing.T, name string) []string {
	t.Helper()
	_, stderr, err := runCLI(t, "", name, "--help")
	if err != nil {
		t.Fatalf("%s --help: %v", name, err)
	}
	i := strings.LastIndex(stderr, "\nFlags:\n")
	if i < 0 {
		t.Fatalf("%s --help lists no flags:\n%s", name, stderr)
	}
	var out []string
	for _, m := range regexp.MustCompile(`(?m)^  -([A-Za-z0-9][A-Za-z0-9_-]*)`).FindAllStringSubmatch(stderr[i:], -1) {
		out = append(out, m[1])
	}
	return out
}

var (
	backticked = regexp.MustCompile("`([^`]+)`")
	flagToken  = regexp.MustCompile(`(?:^|[\s/|(])--?([a-z][a-z0-9-]*)`)
)

// TestREADMEListsEveryFlag: README's "Every command's flags" lists, for every command,
// each of its flags (every spelling) and no flag it lacks. A bullet covers the commands
// named in backticks before its first colon; a flag is a backticked -name or --name.
// The command table above it has a row for every command.
func TestREADMEListsEveryFlag(t *testing.T) {
	sec := readmeSection(t, "CLI reference")
	_, list, ok := strings.Cut(sec, "\n### Every command's flags\n")
	if !ok {
		t.Fatal(`README.md's CLI reference has no "### Every command's flags"`)
	}
	documented := map[string]map[string]bool{} // command → flags its bullets list
	for _, item := range strings.Split(list, "\n- ")[1:] {
		item, _, _ = strings.Cut(item, "\n\n")
		lead, body, ok := strings.Cut(item, ":")
		if !ok {
			t.Fatalf("bullet %q: want \"`command`, …: flags\"", item)
		}
		var cmds []string
		for _, m := range backticked.FindAllStringSubmatch(lead, -1) {
			if commands[m[1]] != nil {
				cmds = append(cmds, m[1])
			}
		}
		if len(cmds) == 0 {
			t.Errorf("bullet %q names no command before its colon", item)
		}
		for _, c := range cmds {
			if documented[c] == nil {
				documented[c] = map[string]bool{}
			}
			for _, span := range backticked.FindAllStringSubmatch(body, -1) {
				for _, f := range flagToken.FindAllStringSubmatch(span[1], -1) {
					documented[c][f[1]] = true
				}
			}
		}
	}
	for name := range commands {
		t.Run(name, func(t *testing.T) {
			doc, ok := documented[name]
			if !ok {
				t.Fatalf("README lists no flags for %s (a bullet \"`%s`: …\", or \"no flags\")", name, name)
			}
			have := commandFlags(t, name)
			for _, f := range have {
				if !doc[f] {
					t.Errorf("%s --%s: missing from README's flag list", name, f)
				}
			}
			for f := range doc {
				if !slices.Contains(have, f) {
					t.Errorf("README lists %s --%s, which %s does not take", name, f, name)
				}
			}
		})
	}
	table, _, _ := strings.Cut(sec, "\n### ")
	for name := range commands {
		if !regexp.MustCompile("(?m)^\\| [^|]*`" + name + "[` /]").MatchString(table) {
			t.Errorf("README's command table has no row for %s", name)
		}
	}
}

// TestREADMEListsEveryConfigKey: README's Configuration section names every section of
// core/config (`[model]`, …) with the list of its keys in parentheses — each key of the
// section and nothing else (text after a ';' is a remark).
func TestREADMEListsEveryConfigKey(t *testing.T) {
	sec := readmeSection(t, "Configuration")
	ct := reflect.TypeOf(config.Config{})
	for i := range ct.NumField() {
		f := ct.Field(i)
		name := f.Tag.Get("toml")
		if name == "" || name == "-" {
			continue
		}
		st := f.Type
		if st.Kind() == reflect.Map {
			name, st = name+".NAME", st.Elem()
		}
		var want []string
		for j := range st.NumField() {
			if k := st.Field(j).Tag.Get("toml"); k != "" && k != "-" {
				want = append(want, k)
			}
		}
		t.Run(name, func(t *testing.T) {
			_, rest, ok := strings.Cut(sec, "`["+name+"]` (")
			if !ok {
				t.Fatalf("README's Configuration lacks \"`[%s]` (keys)\"", name)
			}
			keys, depth := "", 1
			for _, r := range rest {
				depth += map[rune]int{'(': 1, ')': -1}[r]
				if depth == 0 {
					break
				}
				keys += string(r)
			}
			keys, _, _ = strings.Cut(keys, ";")
			var got []string
			for _, k := range strings.Split(keys, ",") {
				got = append(got, strings.TrimSpace(k))
			}
			sort.Strings(got)
			sort.Strings(want)
			if !slices.Equal(got, want) {
				t.Errorf("[%s] keys: README lists %v, core/config has %v", name, got, want)
			}
		})
	}
}
