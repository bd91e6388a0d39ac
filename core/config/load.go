package config

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// FileName is the name Find looks for.
const FileName = "minfer.toml"

// Error is one problem with a configuration: a syntax error, an unknown key, a value of
// the wrong type or an invalid value. Parse, Load and Validate return one *Error, or
// several joined with errors.Join (use errors.As to get the first).
type Error struct {
	File  string // "" when not read from a file
	Line  int    // 1-based; 0 when unknown (e.g. a default value)
	Key   string // dotted TOML key ("model.kv", "plugins.x.source"); "" for syntax errors
	Value string // the offending value as TOML would write it; may be ""
	Msg   string

	at string // the key whose line places the error, when not Key
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("config: ")
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			fmt.Fprintf(&b, ":%d", e.Line)
		}
		b.WriteString(": ")
	} else if e.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Key != "" {
		b.WriteString(displayKey(e.Key))
		if e.Value != "" {
			b.WriteString(" = " + e.Value)
		}
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// displayKey writes "model.kv" as "[model] kv" and a top-level key as itself.
func displayKey(key string) string {
	i := strings.LastIndexByte(key, '.')
	if i < 0 {
		return key
	}
	return "[" + key[:i] + "] " + key[i+1:]
}

// Find returns the configuration file minfer uses when none is named, the first that
// exists of:
//
//  1. ./minfer.toml (the current directory)
//  2. $XDG_CONFIG_HOME/minfer/minfer.toml ($HOME/.config/minfer/minfer.toml when
//     XDG_CONFIG_HOME is unset; os.UserConfigDir on other systems)
//
// ok is false when neither exists; minfer then runs with Default().
func Find() (path string, ok bool) {
	cands := []string{FileName}
	if dir, err := os.UserConfigDir(); err == nil {
		cands = append(cands, filepath.Join(dir, "minfer", FileName))
	}
	for _, p := range cands {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, true
		}
	}
	return "", false
}

// Load reads and parses the file at path (see Parse).
func Load(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(data, path)
}

// MaxFileBytes bounds a configuration file; Parse refuses larger documents.
const MaxFileBytes = 1 << 20

// MaxNesting bounds how deep a document nests arrays and inline tables (a table
// header's brackets count too). The TOML decoder's time and memory grow with the square
// of the depth: 50,000 nested inline tables, 350 KB, took it past 2 GiB and a fatal
// out of memory. Real configurations nest a params table 2-3 levels.
const MaxNesting = 64

// tooDeep returns the 1-based line where doc's brackets and braces, outside strings and
// comments, first nest deeper than max, or 0. It does not judge the syntax: the
// decoder does.
func tooDeep(doc string, max int) int {
	depth, line := 0, 1
	for i := 0; i < len(doc); i++ {
		switch c := doc[i]; c {
		case '\n':
			line++
		case '#':
			for i+1 < len(doc) && doc[i+1] != '\n' {
				i++
			}
		case '"', '\'':
			q := doc[i : i+1]
			if strings.HasPrefix(doc[i:], strings.Repeat(q, 3)) {
				q = strings.Repeat(q, 3)
			}
			for i += len(q); i < len(doc) && !strings.HasPrefix(doc[i:], q); i++ {
				switch {
				case doc[i] == '\n':
					line++
				case doc[i] == '\\' && c == '"' && i+1 < len(doc):
					i++ // an escape in a basic string: \" does not end it
					if doc[i] == '\n' {
						line++
					}
				}
			}
			i += len(q) - 1
		case '[', '{':
			if depth++; depth > max {
				return line
			}
		case ']', '}':
			depth--
		}
	}
	return 0
}

// LoadOrDefault loads path when it is not "", else the file Find returns, else returns
// Default(). file is the path used ("" for the defaults).
func LoadOrDefault(path string) (c *Config, file string, err error) {
	if path == "" {
		var ok bool
		if path, ok = Find(); !ok {
			return Default(), "", nil
		}
	}
	c, err = Load(path)
	return c, path, err
}

// Parse decodes a minfer.toml document strictly and validates it. Absent keys take their
// Default() values; a [plugins.NAME] table with a built-in NAME replaces that built-in's
// entry as a whole. filename is used in error messages and sets Config.Dir.
//
// Errors (all *Error, joined): TOML syntax; a key the schema does not know (except
// inside a plugin's params table); a value of the wrong TOML type; an invalid value
// (see Validate). Each names the key and, where the file has it, its line.
func Parse(data []byte, filename string) (*Config, error) {
	if len(data) > MaxFileBytes {
		return nil, &Error{File: filename, Msg: fmt.Sprintf("larger than %d bytes: not a configuration file?", MaxFileBytes)}
	}
	doc := string(data)
	if line := tooDeep(doc, MaxNesting); line > 0 {
		return nil, &Error{File: filename, Line: line, Msg: fmt.Sprintf("arrays and inline tables nested deeper than %d levels", MaxNesting)}
	}
	var raw map[string]any
	md, err := toml.Decode(doc, &raw)
	if err != nil {
		return nil, decodeError(err, filename)
	}
	if errs := checkKeys(md, raw); len(errs) > 0 {
		return nil, placeErrors(errs, doc, filename)
	}
	c := Default()
	if filename != "" {
		c.Dir = filepath.Dir(filename)
	}
	if _, err := toml.Decode(doc, c); err != nil {
		return nil, decodeError(err, filename)
	}
	for name, p := range c.Plugins {
		c.Plugins[name] = p.WithDefaults(name)
	}
	if errs := c.validate(); len(errs) > 0 {
		return nil, placeErrors(errs, doc, filename)
	}
	return c, nil
}

// WithDefaults fills the zero fields of a plugin entry named name: the source of a
// built-in name, the timeout by source kind, the memory cap, an empty params table and
// a built-in's role.
func (p Plugin) WithDefaults(name string) Plugin {
	if _, ok := Builtins[name]; ok && p.Source == "" {
		p.Source = SourceBuiltin + ":" + name
	}
	kind, ref, err := p.SourceKind()
	if p.Timeout == 0 {
		p.Timeout = DefaultWasmTimeout
		if err == nil && kind == SourceProcess {
			p.Timeout = DefaultProcessTimeout
		}
	}
	if p.MemoryMB == 0 {
		p.MemoryMB = DefaultMemoryMB
	}
	if p.Params == nil {
		p.Params = map[string]any{}
	}
	if role, ok := Builtins[ref]; ok && err == nil && kind == SourceBuiltin && len(p.Roles) == 0 {
		p.Roles = []string{string(role)}
	}
	return p
}

// ResolvePath returns p joined to the config file's directory when p is relative and
// the config was read from a file; otherwise p unchanged.
func (c *Config) ResolvePath(p string) string {
	if p == "" || filepath.IsAbs(p) || c.Dir == "" {
		return p
	}
	return filepath.Join(c.Dir, p)
}

// PolicyName is the depth-policy plugin a request uses: "static" when [spec] depth
// forces a depth, else [spec] policy.
func (s Spec) PolicyName() string {
	if s.Depth != DepthAuto {
		return "static"
	}
	return s.Policy
}

// RoleSettings returns the settings the config gives plugin name for the roles it
// plays here (keys as in TOML): the sampler's (Sampling.SamplerParams), the penalty's
// (Sampling.PenaltyParams), the depth policy's (Spec.PolicySettings). Which of them
// reach the plugin, merged under its own [plugins.NAME] params table, is the plugin
// side's business (plugins.Params): a plugin declares what it reads.
func (c *Config) RoleSettings(name string) (map[string]any, error) {
	if _, ok := c.Plugins[name]; !ok {
		return nil, fmt.Errorf("config: no plugin %q declared", name)
	}
	m := map[string]any{}
	if name == c.Sampling.SamplerName() {
		maps.Copy(m, c.Sampling.SamplerParams())
	}
	if name == c.Sampling.Penalty {
		maps.Copy(m, c.Sampling.PenaltyParams())
	}
	if name == c.Spec.PolicyName() {
		maps.Copy(m, c.Spec.PolicySettings())
	}
	return m, nil
}

// decodeError turns an error of the TOML decoder into an *Error.
func decodeError(err error, filename string) error {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		return &Error{File: filename, Line: pe.Position.Line, Key: pe.LastKey, Msg: pe.Message}
	}
	return &Error{File: filename, Msg: strings.TrimPrefix(err.Error(), "toml: ")}
}

// maxErrors bounds the problems reported at once: each costs a decode to place, and
// a file with hundreds of problems is best fixed from the top.
const maxErrors = 10

// placeErrors sets File and Line of each error and joins them.
func placeErrors(errs []*Error, doc, filename string) error {
	var more int
	if len(errs) > maxErrors {
		errs, more = errs[:maxErrors], len(errs)-maxErrors
	}
	out := make([]error, len(errs), len(errs)+1)
	for i, e := range errs {
		e.File = filename
		at := e.Key
		if e.at != "" {
			at = e.at
		}
		// A key absent from the file (a missing source) is placed at its table.
		for k := strings.Split(at, "."); e.Line == 0 && at != "" && len(k) > 0; k = k[:len(k)-1] {
			e.Line = keyLine(doc, k)
		}
		out[i] = e
	}
	if more > 0 {
		out = append(out, &Error{File: filename, Msg: fmt.Sprintf("… and %d more problems", more)})
	}
	return errors.Join(out...)
}

var (
	typeOfConfig     = reflect.TypeFor[Config]()
	typeOfParams     = reflect.TypeFor[map[string]any]()
	typeOfDuration   = reflect.TypeFor[time.Duration]()
	typeOfDepth      = reflect.TypeFor[Depth]()
	typeOfBatchDepth = reflect.TypeFor[BatchDepth]()
	typeOfStrings    = reflect.TypeFor[[]string]()
)

// checkKeys walks every key of the document (in document order) against the Config
// schema: a key the schema does not know, or whose value has the wrong TOML type, is an
// error. Below a plugin's params nothing is checked. Children of a bad key are skipped.
func checkKeys(md toml.MetaData, raw map[string]any) []*Error {
	var errs []*Error
	bad := map[string]bool{} // keys already reported: their children are skipped
	markBad := func(k toml.Key) { bad[k.String()] = true }
outer:
	for _, k := range md.Keys() {
		for i := 1; i <= len(k); i++ {
			if bad[k[:i].String()] {
				continue outer
			}
		}
		t := typeOfConfig
		for i, name := range k {
			switch {
			case t == typeOfParams:
				continue outer
			case t.Kind() == reflect.Struct:
				f, ok := fieldByTag(t, name)
				if !ok {
					msg := "unknown key"
					if near := nearest(name, tagNames(t)); near != "" {
						msg += fmt.Sprintf("; did you mean %q?", near)
					}
					errs = append(errs, &Error{Key: k[:i+1].String(), Msg: msg + " (known: " + strings.Join(tagNames(t), ", ") + ")"})
					markBad(k[:i+1])
					continue outer
				}
				t = f.Type
			case t.Kind() == reflect.Map:
				t = t.Elem()
			default: // a dotted key below a scalar: the scalar is a table in the file
				want, _ := typeOK(t, nil)
				errs = append(errs, &Error{Key: k[:i].String(), Msg: "wrong type table, want " + want, at: k.String()})
				markBad(k[:i])
				continue outer
			}
		}
		v := rawAt(raw, k)
		if want, ok := typeOK(t, v); !ok {
			msg := fmt.Sprintf("wrong type %s, want %s", tomlType(v), want)
			if t == typeOfDepth || t == typeOfBatchDepth {
				msg = "want " + want
			}
			errs = append(errs, &Error{Key: k.String(), Value: shortValue(v), Msg: msg})
			markBad(k)
		}
	}
	return errs
}

func fieldByTag(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if tag, _, _ := strings.Cut(f.Tag.Get("toml"), ","); tag == name && tag != "-" {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func tagNames(t reflect.Type) []string {
	var names []string
	for i := range t.NumField() {
		if tag, _, _ := strings.Cut(t.Field(i).Tag.Get("toml"), ","); tag != "" && tag != "-" {
			names = append(names, tag)
		}
	}
	return names
}

// nearest returns the known name closest to name when it is a likely misspelling
// (edit distance ≤ 2, or ≤ 1 for short names), else "".
func nearest(name string, known []string) string {
	best, bestD := "", 3
	if len(name) <= 4 {
		bestD = 2
	}
	for _, k := range known {
		if d := editDistance(strings.ToLower(name), k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// rawAt returns the decoded value at key k, nil if a step is not a table.
func rawAt(raw map[string]any, k toml.Key) any {
	var v any = raw
	for _, name := range k {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[name]
	}
	return v
}

// typeOK reports whether the TOML value v fits the Go type t, and what t wants.
func typeOK(t reflect.Type, v any) (want string, ok bool) {
	switch t {
	case typeOfDuration:
		_, ok := v.(string)
		return `a duration string such as "100ms" or "2s"`, ok
	case typeOfDepth:
		var d Depth
		return depthSyntax.want(), v != nil && d.UnmarshalTOML(v) == nil
	case typeOfBatchDepth:
		var c BatchDepth
		return batchDepthSyntax.want(), v != nil && c.UnmarshalTOML(v) == nil
	case typeOfStrings:
		a, ok := v.([]any)
		for _, e := range a {
			if _, isStr := e.(string); !isStr {
				return "an array of strings", false
			}
		}
		return "an array of strings", ok
	}
	switch t.Kind() {
	case reflect.String:
		_, ok := v.(string)
		return "a string", ok
	case reflect.Int, reflect.Int64:
		_, ok := v.(int64)
		return "an integer", ok
	case reflect.Float64:
		switch v.(type) {
		case float64, int64:
			return "a number", true
		}
		return "a number", false
	case reflect.Bool:
		_, ok := v.(bool)
		return "a boolean", ok
	case reflect.Struct, reflect.Map:
		_, ok := v.(map[string]any)
		return "a table", ok
	}
	panic("BUG: config: no TOML type for " + t.String())
}

func tomlType(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case int64:
		return "integer"
	case float64:
		return "float"
	case bool:
		return "boolean"
	case time.Time:
		return "datetime"
	case map[string]any:
		return "table"
	case []map[string]any:
		return "array of tables"
	case []any:
		return "array"
	}
	return fmt.Sprintf("%T", v)
}

// shortValue renders a scalar for a message; "" for tables, arrays and long strings.
func shortValue(v any) string {
	switch v := v.(type) {
	case string:
		if len(v) > 40 {
			return ""
		}
		return fmt.Sprintf("%q", v)
	case int64, float64, bool:
		return fmt.Sprint(v)
	}
	return ""
}

// probeFail fails to decode, so the TOML decoder reports the position of the key it
// sits at.
type probeFail struct{}

var errProbe = errors.New("probe")

func (probeFail) UnmarshalTOML(any) error { return errProbe }

// keyLine returns the line of key k in doc (0 if unknown). The decoder keeps key
// positions private; it reveals them in a ParseError, so keyLine decodes doc into a
// struct built for k whose only leaf fails.
func keyLine(doc string, k []string) int {
	t := reflect.TypeFor[probeFail]()
	for i := len(k) - 1; i >= 0; i-- {
		if k[i] == "" || strings.ContainsAny(k[i], "\"\\,`") {
			return 0
		}
		t = reflect.StructOf([]reflect.StructField{{
			Name: "F", Type: t, Tag: reflect.StructTag(`toml:"` + k[i] + `"`),
		}})
	}
	_, err := toml.Decode(doc, reflect.New(t).Interface())
	var pe toml.ParseError
	if errors.As(err, &pe) {
		return pe.Position.Line
	}
	return 0
}

// Nearest returns the name of known closest to name when name is a likely misspelling
// of it, else "" (the rule the config's "did you mean" uses; the CLI's flags use it too).
func Nearest(name string, known []string) string { return nearest(name, known) }
