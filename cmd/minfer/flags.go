package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/minfer/minfer/core/config"
)

// This file is the flag layer shared by the generating commands (run, serve,
// specbench): the flags, their llama.cpp spellings, how a parse error is reported and
// how a config error caused by a flag names the flag.

// parseFlags parses args with fs, turning -h/--help into errHelp (after printing the
// usage) and any other flag error into a one-line usageError that names the flag as
// typed, suggests a near flag and points to --help. Flags may follow positional
// arguments (llama.cpp style).
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
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
				return nil, errHelp
			}
			return nil, usageError{flagError(fs, all, err)}
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
			hint = fmt.Sprintf(" (did you mean %s?)", dashed(near))
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
				name, _, _ := strings.Cut(rest[i+len(sep):], ": ")
				return fmt.Errorf("%s: %s %s: want %s; %s", fs.Name(), typed(args, name), val, flagKind(fs.Lookup(name)), help)
			}
		}
	}
	return fmt.Errorf("%s: %v; %s", fs.Name(), err, help)
}

// flagKind says what a flag's value must be.
func flagKind(f *flag.Flag) string {
	if f == nil {
		return "a valid value"
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
	return "a valid value"
}

// dashed writes a flag name as --name (a single letter as -n).
func dashed(name string) string {
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
	return dashed(name)
}

// flagConfigKeys maps a flag to the config key it sets, so that a config error caused
// by a flag's value names the flag (--temp -1, not [sampling] temperature = -1).
var flagConfigKeys = map[string]string{
	"n": "sampling.n_predict", "predict": "sampling.n_predict", "n-predict": "sampling.n_predict",
	"ctx": "model.ctx", "c": "model.ctx", "ctx-size": "model.ctx",
	"batch": "model.batch", "b": "model.batch", "batch-size": "model.batch",
	"threads": "model.threads", "t": "model.threads",
	"temp": "sampling.temperature", "seed": "sampling.seed", "s": "sampling.seed",
	"top-k": "sampling.top_k", "top-p": "sampling.top_p", "min-p": "sampling.min_p",
	"repeat-penalty": "sampling.repeat_penalty", "repeat-last-n": "sampling.repeat_last_n",
	"presence-penalty": "sampling.presence_penalty", "frequency-penalty": "sampling.frequency_penalty",
	"device": "model.device", "depth": "spec.depth", "draft-max": "spec.draft_max", "draft-n": "spec.draft_max",
	"draft-min": "spec.draft_min", "draft-p-min": "spec.min_conf",
	"policy": "spec.policy", "sampler": "sampling.sampler", "penalty": "sampling.penalty",
	"parallel": "server.parallel", "np": "server.parallel", "max-tokens": "server.max_tokens",
}

// flagErrors rewrites the errors of cfg.Validate whose key a flag of fs set as errors
// naming that flag and the value typed; the others stay as they are.
func flagErrors(fs *flag.FlagSet, err error) error {
	byKey := map[string]*flag.Flag{}
	fs.Visit(func(f *flag.Flag) {
		if k, ok := flagConfigKeys[f.Name]; ok {
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
				out[i] = fmt.Errorf("%s: %s %s: %s", fs.Name(), dashed(f.Name), f.Value, ce.Msg)
			}
		}
	}
	return errors.Join(out...)
}

// unescape processes the escapes llama.cpp's -e does in a prompt: \n \r \t \v \f \a
// \b \\ \' \" \? \0 and \xHH. An unknown escape is kept as written.
func unescape(s string) string {
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
