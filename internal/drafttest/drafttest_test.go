package drafttest

import (
	"context"
	"slices"
	"testing"

	"github.com/minfer/minfer/sdk"
)

// told records what a drafter is told.
type told struct{ got []int32 }

func (d *told) Draft(_ context.Context, q *sdk.DraftRequest) (sdk.DraftResult, error) {
	d.got = append(d.got, q.Appended...)
	return sdk.DraftResult{}, nil
}

// TestRounds: a drafter is told every token of the sequence once, in order, in one
// prompt call and 512 rounds of Step; the sequences are deterministic and copy as
// their docs say.
func TestRounds(t *testing.T) {
	for _, seq := range [][]int32{CopyHeavy(), Copied()} {
		var d told
		n, err := Rounds(t.Context(), &d, seq)
		if err != nil {
			t.Fatal(err)
		}
		if n != 1+512 || !slices.Equal(d.got, seq) {
			t.Errorf("%d calls telling %d tokens, want 513 calls telling the %d of the sequence", n, len(d.got), len(seq))
		}
	}
	if !slices.Equal(CopyHeavy(), CopyHeavy()) {
		t.Error("CopyHeavy differs between calls")
	}
	c := Copied()
	for i := 300; i < len(c); i++ {
		if c[i] != c[i-300] {
			t.Fatalf("Copied[%d] = %d, want a copy of [%d] = %d", i, c[i], i-300, c[i-300])
		}
	}
}
