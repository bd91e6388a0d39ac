// Package cli holds the command-line machinery of minfer's commands that is not one
// command's: the errors that map to exit codes (ExitCode: 0 ok, 1 runtime error, 2
// usage error, 130 interrupted), flag parsing with one-line errors that name the flag
// as typed, and the flag value types the commands share.
package cli

import (
	"context"
	"errors"

	"github.com/minfer/minfer/internal/usage"
)

// UsageError marks a mistake in the command line (exit code 2). It is usage.Error, the
// type the packages behind the commands return without importing this one.
type UsageError = usage.Error

// Usagef returns a UsageError with a formatted message.
func Usagef(format string, args ...any) error { return usage.Errorf(format, args...) }

// ErrInterrupted ends a command the user interrupted (Ctrl-C, SIGTERM): exit code 130,
// as shells report a command ended by SIGINT.
var ErrInterrupted = errors.New("interrupted")

// Interrupted is ErrInterrupted caused by ctx's end: it reads "interrupted" and
// matches both ErrInterrupted and the context's error.
func Interrupted(ctx context.Context) error {
	return interruptError{context.Cause(ctx)}
}

type interruptError struct{ cause error }

func (interruptError) Error() string     { return ErrInterrupted.Error() }
func (e interruptError) Unwrap() []error { return []error{ErrInterrupted, e.cause} }

// ErrHelp is returned after printing help that the user asked for (exit code 0).
var ErrHelp = errors.New("help requested")

// ExitCode maps a command's error to the process exit code.
func ExitCode(err error) int {
	var ue UsageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue):
		return 2
	case errors.Is(err, ErrInterrupted):
		return 130
	default:
		return 1
	}
}
