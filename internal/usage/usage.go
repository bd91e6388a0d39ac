// Package usage holds the error of a mistake in what the user asked for — a flag, an
// argument, a name that the configuration does not declare — as the packages behind
// minfer's commands return it. cmd/minfer (internal/cli.ExitCode) maps it to exit
// code 2; any other error is a runtime error (1). It is its own package, standard
// library only, so that a package returning one (plugins/replay, internal/stack,
// internal/specbench) need not depend on the command-line machinery of internal/cli.
package usage

import "fmt"

// Error marks a usage mistake; errors.As finds it through any wrapping.
type Error struct{ Err error }

func (e Error) Error() string { return e.Err.Error() }
func (e Error) Unwrap() error { return e.Err }

// Errorf returns an Error with a formatted message (%w wraps as fmt.Errorf does).
func Errorf(format string, args ...any) error {
	return Error{fmt.Errorf(format, args...)}
}
