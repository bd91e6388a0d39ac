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
	"sort"
	"strings"
	"syscall"

	"github.com/minfer/minfer/internal/cli"
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
	// StderrTerminal reports whether Stderr is a terminal: progress lines that redraw
	// themselves with \r go there only then (stdout may be piped to a file or tee while
	// stderr shows progress, and a log file must not collect redraws).
	StderrTerminal bool
}

// The errors that map to exit codes, and flag parsing, live in internal/cli.
type usageError = cli.UsageError

func usagef(format string, args ...any) error { return cli.Usagef(format, args...) }

var errHelp = cli.ErrHelp

func interrupted(ctx context.Context) error { return cli.Interrupted(ctx) }

func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) { return cli.ParseFlags(fs, args) }

func unescape(s string) string { return cli.Unescape(s) }

type stringList = cli.StringList

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
func exitCode(err error) int { return cli.ExitCode(err) }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	m := &Main{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, StderrTerminal: cli.IsTerminal(os.Stderr)}
	stopProfile, err := cli.StartProfile(os.Getenv("MINFER_CPUPROFILE"))
	if err == nil {
		err = m.Run(ctx, os.Args[1:])
		stopProfile()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "minfer: %v\n", err)
	}
	os.Exit(exitCode(err))
}
