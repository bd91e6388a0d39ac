// Command minfer is an LLM inference engine: one binary, one file per command.
//
// Each command file registers itself with register in an init function; Main.Run
// dispatches to it. Errors map to exit codes in one place, exitCode: 0 ok, 1 runtime
// error, 2 usage error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"sort"
	"strings"
	"syscall"
)

// command is one subcommand of minfer.
type command struct {
	name    string
	summary string // one line for the command list
	// run executes the command with the arguments after its name. Flag parse errors
	// and wrong arguments are returned as usageError (see usagef).
	run func(ctx context.Context, m *Main, args []string) error
}

var commands = map[string]*command{}

func register(c *command) {
	if _, dup := commands[c.name]; dup {
		panic("BUG: command registered twice: " + c.name)
	}
	commands[c.name] = c
}

// Main holds the process's streams so commands are testable.
type Main struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// IsTerminal reports whether Stdout is a terminal (progress bars, colours).
	IsTerminal bool
}

// usageError marks a mistake in the command line (exit code 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// usagef returns a usageError with a formatted message.
func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// errHelp is returned after printing help that the user asked for (exit code 0).
var errHelp = errors.New("help requested")

// newFlagSet makes a flag set that prints its usage (with examples) to m.Stderr and
// does not exit the process.
func (m *Main) newFlagSet(name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	fs.Usage = func() {
		fmt.Fprint(m.Stderr, strings.TrimLeft(usage, "\n"))
		fmt.Fprintln(m.Stderr, "\nFlags:")
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args with fs, turning -h/--help into errHelp and any other flag
// error into a usageError. Flags may follow positional arguments (llama.cpp style).
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, errHelp
			}
			return nil, usageError{err}
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

const mainUsage = `minfer — LLM inference with pluggable speculative decoding

Usage: minfer COMMAND [flags] [args]

Commands:
`

func (m *Main) printUsage(w io.Writer) {
	fmt.Fprint(w, mainUsage)
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-12s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'minfer COMMAND --help' for a command's flags and examples.")
}

// Run executes the command line args (without the program name).
func (m *Main) Run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		m.printUsage(m.Stderr)
		return usagef("no command given")
	}
	if args[0] == "--version" || args[0] == "-v" {
		args = []string{"version"}
	}
	switch args[0] {
	case "-h", "--help", "help":
		if len(args) == 2 && args[0] == "help" && commands[args[1]] != nil { // help COMMAND
			if err := commands[args[1]].run(ctx, m, []string{"--help"}); !errors.Is(err, errHelp) {
				return err
			}
			return nil
		}
		m.printUsage(m.Stdout)
		return nil
	}
	c, ok := commands[args[0]]
	if !ok {
		return usagef("unknown command %q (run 'minfer --help' for the list)", args[0])
	}
	err := c.run(ctx, m, args[1:])
	if errors.Is(err, errHelp) {
		return nil
	}
	return err
}

// exitCode maps an error from Run to the process exit code.
func exitCode(err error) int {
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue):
		return 2
	default:
		return 1
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	m := &Main{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, IsTerminal: isTerminal(os.Stdout)}
	stopProfile, err := startProfile(os.Getenv("MINFER_CPUPROFILE"))
	if err == nil {
		err = m.Run(ctx, os.Args[1:])
		stopProfile()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "minfer: %v\n", err)
	}
	os.Exit(exitCode(err))
}

// startProfile writes a CPU profile of the whole command to path (MINFER_CPUPROFILE;
// read it with go tool pprof); "" profiles nothing.
func startProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("MINFER_CPUPROFILE: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("MINFER_CPUPROFILE: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
