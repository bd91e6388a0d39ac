package server

import (
	"context"
	"testing"

	"github.com/minfer/minfer/internal/enginetest"
	"github.com/minfer/minfer/sdk"
)

// TestLogprobsBest: the alternatives are the n most likely tokens, best first (ties:
// lower id), from sorted top-K rows and from unsorted full rows alike.
func TestLogprobsBest(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ids    []int32
		logits []float32
		n      int
		want   []int32
	}{
		{"top-k row", []int32{7, 3, 9}, []float32{5, 4, 1}, 2, []int32{7, 3}},
		{"full row", []int32{0, 1, 2, 3, 4}, []float32{1, 5, 3, 5, -2}, 3, []int32{1, 3, 2}},
		{"n over the row", []int32{0, 1}, []float32{1, 2}, 5, []int32{1, 0}},
		{"none", []int32{0, 1}, []float32{1, 2}, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &lpSampler{n: tc.n}
			got := l.best(sdk.SampleRow{IDs: tc.ids, Logits: tc.logits, LogSumExp: 10})
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want ids %v", got, tc.want)
			}
			for i, a := range got {
				if a.id != tc.want[i] {
					t.Fatalf("got %v, want ids %v", got, tc.want)
				}
			}
		})
	}
}

// TestLogprobsCopyRows: the rows of a round are the engine's buffers, reused by the
// next round; what the wrapper keeps must not change with them.
func TestLogprobsCopyRows(t *testing.T) {
	l := &lpSampler{inner: enginetest.Greedy{}, n: 2}
	ids, logits := []int32{4, 2}, []float32{3, 1}
	r := &sdk.SampleRound{Rows: []sdk.SampleRow{{IDs: ids, Logits: logits, LogSumExp: 4}}}
	if _, err := l.Sample(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	ids[0], ids[1], logits[0], logits[1] = 8, 9, 0, 7 // the next round overwrites the buffers
	e := l.entries(1)[0]
	if e.id != 4 || e.lp != -1 || e.alts[0].id != 4 || e.alts[1].id != 2 || e.alts[1].lp != -3 {
		t.Fatalf("got %+v, want token 4 (-1) with alternatives 4 (-1), 2 (-3)", e)
	}
}
