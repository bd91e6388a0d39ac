package builtin

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/minfer/minfer/sdk"
)

func TestNgram(t *testing.T) {
	for _, tc := range []struct {
		name     string
		params   string
		seq      []int32
		maxDepth int
		want     []int32
		conf0    float32 // confidence of the first token (when want is not empty)
	}{
		{"no repeat", `{}`, []int32{1, 2, 3, 4, 5}, 4, nil, 0},
		{"bigram match", `{}`, []int32{1, 2, 3, 4, 9, 1, 2}, 4, []int32{3, 4, 9, 1}, 0.75},
		{"longest wins", `{}`, []int32{7, 8, 5, 6, 1, 8, 5, 6, 2, 8, 5, 9, 7, 8, 5, 6}, 3, []int32{1, 8, 5}, 0.9375},
		{"latest occurrence", `{}`, []int32{5, 6, 1, 5, 6, 2, 5, 6}, 2, []int32{2, 5}, 0.75},
		{"depth bound", `{}`, []int32{1, 2, 3, 4, 5, 6, 1, 2}, 2, []int32{3, 4}, 0.75},
		{"stops at the end", `{}`, []int32{1, 2, 3, 1, 2}, 8, []int32{3, 1, 2}, 0.75},
		{"n_min 1", `{"n_min":1}`, []int32{4, 9, 3, 4}, 2, []int32{9, 3}, 0.5},
		{"unigram below n_min", `{}`, []int32{4, 9, 3, 4}, 2, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := NewNgram([]byte(tc.params))
			if err != nil {
				t.Fatal(err)
			}
			// told in two chunks, as rounds tell it
			h := len(tc.seq) / 2
			g.Draft(context.Background(), &sdk.DraftRequest{Appended: tc.seq[:h], MaxDepth: 1, Vocab: 16})
			res, err := g.Draft(context.Background(), &sdk.DraftRequest{Appended: tc.seq[h:], MaxDepth: tc.maxDepth, Vocab: 16})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(res.Tokens, tc.want) {
				t.Fatalf("got %v, want %v", res.Tokens, tc.want)
			}
			if len(tc.want) > 0 && res.Conf[0] != tc.conf0 {
				t.Fatalf("first confidence %v, want %v", res.Conf[0], tc.conf0)
			}
			for i := 1; i < len(res.Conf); i++ {
				if !(res.Conf[i] < res.Conf[i-1]) {
					t.Fatalf("confidences %v do not decay", res.Conf)
				}
			}
		})
	}
}

func TestNgramParams(t *testing.T) {
	for params, want := range map[string]string{
		`{"n_min":0}`:           "n_min = 0",
		`{"n_min":3,"n_max":2}`: "n_max = 2",
		`{"n_max":17}`:          "n_max = 17",
		`{"decay":1.5}`:         "decay",
		`{"window":3}`:          `unknown field "window"`,
	} {
		if _, err := NewNgram([]byte(params)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error containing %q", params, err, want)
		}
	}
}
