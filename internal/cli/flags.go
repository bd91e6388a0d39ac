package cli

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/minfer/minfer/core/config"
)

// ParseFlags parses args with fs, turning -h/--help into ErrHelp (after printing the
// usage) and any other flag error into a one-line usageError that names the flag as
// typed, suggests a near flag and points to --help. Flags may follow positional
// arguments (llama.cpp style).
func ParseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	usage, out := fs.Usage, fs.Output()
	fs.Usage = func() {}
	fs.SetOutput(io.Discard) // the flag package would print the error and the usage
	defer func() { fs.Usage = usage; fs.SetOutput(out) }()
	var pos []string
	all := args
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fs.SetOutput(out)
				usage()
				return nil, ErrHelp
			}
			return nil, UsageError{Err: flagError(fs, all, err)}
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// flagError rewrites an error of the flag package as one line naming the command.
func flagError(fs *flag.FlagSet, args []string, err error) error {
	help := fmt.Sprintf("'minfer %s --help' lists the flags", fs.Name())
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		var known []string
		fs.VisitAll(func(f *flag.Flag) { known = append(known, f.Name) })
		hint := ""
		if near := config.Nearest(name, known); near != "" {
			hint = fmt.Sprintf(" (did you mean %s?)", Dashed(near))
		}
		return fmt.Errorf("%s: unknown flag %s%s; %s", fs.Name(), typed(args, name), hint, help)
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return fmt.Errorf("%s: %s needs a value; %s", fs.Name(), typed(args, name), help)
	}
	for _, p := range []string{"invalid value ", "invalid boolean value "} {
		rest, ok := strings.CutPrefix(msg, p)
		if !ok {
			continue
		}
		// invalid value "x" for flag -n: parse error; invalid boolean value "x" for -e: …
		for _, sep := range []string{" for flag -", " for -"} {
			if i := strings.Index(rest, sep); i >= 0 {
				val := rest[:i]
				name, detail, _ := strings.Cut(rest[i+len(sep):], ": ")
				if kind := flagKind(fs.Lookup(name)); kind != "" || detail == "" {
					return fmt.Errorf("%s: %s %s: want %s; %s", fs.Name(), typed(args, name), val, cmp.Or(kind, "a valid value"), help)
				}
				// a value type of minfer's own (config.BatchDepth…): its parser says what it wants
				return fmt.Errorf("%s: %s %s: %s; %s", fs.Name(), typed(args, name), val, detail, help)
			}
		}
	}
	return fmt.Errorf("%s: %v; %s", fs.Name(), err, help)
}

// flagKind says what a flag's value must be ("" for a type it does not know).
func flagKind(f *flag.Flag) string {
	if f == nil {
		return ""
	}
	if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		return "true or false"
	}
	switch t := fmt.Sprintf("%T", f.Value); {
	case strings.Contains(t, "int"), strings.Contains(t, "Int"):
		return "an integer"
	case strings.Contains(t, "float"):
		return "a number"
	case strings.Contains(t, "duration"):
		return "a duration such as 30s"
	}
	return ""
}

// Dashed writes a flag name as --name (a single letter as -n).
func Dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// typed is the flag name as the user wrote it (-ngl or --ngl).
func typed(args []string, name string) string {
	for _, a := range args {
		if a == "--" {
			break
		}
		for _, p := range []string{"--", "-"} {
			if a == p+name || strings.HasPrefix(a, p+name+"=") {
				return p + name
			}
		}
	}
	return Dashed(name)
}

// FlagErrors rewrites the errors of cfg.Validate whose key a flag of fs set (keys maps
// a flag name to the config key it sets) as errors naming that flag and the value
// typed; the others stay as they are.
func FlagErrors(fs *flag.FlagSet, err error, keys map[string]string) error {
	byKey := map[string]*flag.Flag{}
	fs.Visit(func(f *flag.Flag) {
		if k, ok := keys[f.Name]; ok {
			byKey[k] = f
		}
	})
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	out := make([]error, len(errs))
	for i, e := range errs {
		out[i] = e
		var ce *config.Error
		if errors.As(e, &ce) {
			if f := byKey[ce.Key]; f != nil {
				out[i] = fmt.Errorf("%s: %s %s: %s", fs.Name(), Dashed(f.Name), f.Value, ce.Msg)
			}
		}
	}
	return errors.Join(out...)
}

// Unescape processes the escapes llama.cpp's -e does in a prompt: \n \r \t \v \f \a
// \b \\ \' \" \? \0 and \xHH. An unknown escape is kept as written.
func Unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch e := s[i]; e {
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte('\v')
		case 'f':
			b.WriteByte('\f')
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case '0':
			b.WriteByte(0)
		case '\\', '\'', '"', '?':
			b.WriteByte(e)
		case 'x':
			if i+2 < len(s) {
				if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
					b.WriteByte(byte(v))
					i += 2
					continue
				}
			}
			b.WriteString(`\x`)
		default:
			b.WriteByte('\\')
			b.WriteByte(e)
		}
	}
	return b.String()
}

// StringList is a repeatable string flag: each use adds a value.
type StringList []string

func (s *StringList) String() string     { return strings.Join(*s, ",") }
func (s *StringList) Set(v string) error { *s = append(*s, v); return nil }

// IntList is a flag of comma-separated integers, as llama-bench takes -p and -n;
// repeating the flag adds to the list, and the first value given replaces the default
// (Vals as the flag is defined).
type IntList struct {
	Vals []int
	set  bool
}

func (l *IntList) String() string {
	s := make([]string, len(l.Vals))
	for i, v := range l.Vals {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, ",")
}

func (l *IntList) Set(v string) error {
	if !l.set {
		l.Vals, l.set = nil, true
	}
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return fmt.Errorf("%q is not an integer", f)
		}
		l.Vals = append(l.Vals, n)
	}
	return nil
}
