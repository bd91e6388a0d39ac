package cli

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/minfer/minfer/internal/usage"
)

// TestExitCode: a usage mistake returned by a package behind a command (usage.Error,
// however wrapped) exits 2, like one of the command line's own; the rest keep theirs.
func TestExitCode(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, 0},
		{"runtime", errors.New("disk full"), 1},
		{"usage", Usagef("--x: bad"), 2},
		{"package usage", usage.Errorf("replay: no plugin %q", "x"), 2},
		{"wrapped package usage", fmt.Errorf("policy replay: %w", usage.Errorf("no plugin %q", "x")), 2},
		{"interrupted", Interrupted(ctx), 130},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ExitCode(tc.err); got != tc.want {
				t.Errorf("ExitCode(%v): got %d, want %d", tc.err, got, tc.want)
			}
		})
	}
}
