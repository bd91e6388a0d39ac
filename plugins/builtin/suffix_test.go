package builtin

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/minfer/minfer/sdk"
)

func suffixDraft(t *testing.T, params string, seq []int32, maxDepth int) sdk.DraftResult {
	t.Helper()
	s, err := NewSuffix([]byte(params))
	if err != nil {
		t.Fatal(err)
	}
	h := len(seq) / 3 // told in two chunks, as rounds tell it
	s.Draft(context.Background(), &sdk.DraftRequest{Appended: seq[:h], MaxDepth: 1, Vocab: 64})
	res, err := s.Draft(context.Background(), &sdk.DraftRequest{Appended: seq[h:], MaxDepth: maxDepth, Vocab: 64})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestSuffix(t *testing.T) {
	for _, tc := range []struct {
		name     string
		params   string
		seq      []int32
		maxDepth int
		want     []int32
		conf     []float32
	}{
		{"nothing earlier", `{}`, []int32{1, 2, 3, 4, 5}, 8, nil, nil},
		// one earlier occurrence of 1 2 3: the copy, as long as the match allows
		{"copy", `{}`, []int32{1, 2, 3, 4, 5, 6, 9, 1, 2, 3}, 8, []int32{4, 5, 6}, []float32{1, 1, 1}},
		{"depth bound", `{}`, []int32{1, 2, 3, 4, 5, 6, 9, 1, 2, 3}, 2, []int32{4, 5}, []float32{1, 1}},
		// 7 went on to 8 twice and to 9 once: the most supported continuation, at 2/3
		{"most support", `{}`, []int32{7, 8, 1, 7, 9, 2, 7, 8, 1, 3, 7}, 8, []int32{8}, []float32{2.0 / 3}},
		// the longer match (5 7) leads to 9 only, with certainty
		{"longer match", `{}`, []int32{7, 8, 1, 5, 7, 9, 4, 7, 8, 2, 5, 7}, 8, []int32{9, 4}, []float32{1, 1}},
		{"min_prob cuts", `{"min_prob":0.7}`, []int32{7, 8, 1, 7, 9, 2, 7, 8, 1, 3, 7}, 8, nil, nil},
		{"factor and offset", `{"factor":0,"offset":1}`, []int32{1, 2, 3, 4, 5, 6, 9, 1, 2, 3}, 8, []int32{4}, []float32{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := suffixDraft(t, tc.params, tc.seq, tc.maxDepth)
			if !slices.Equal(res.Tokens, tc.want) || !slices.Equal(res.Conf, tc.conf) {
				t.Fatalf("got %v %v, want %v %v", res.Tokens, res.Conf, tc.want, tc.conf)
			}
		})
	}
}

// TestSuffixDepthLimit: the trie holds substrings of at most depth tokens, so after a
// match of m tokens a long copy is proposed only depth - m tokens far (the best of the
// matches here is m = 1, with depth - 1 tokens).
func TestSuffixDepthLimit(t *testing.T) {
	var seq []int32
	for i := range 40 {
		seq = append(seq, int32(i))
	}
	seq = append(seq, 60, 0, 1, 2, 3)
	res := suffixDraft(t, `{"depth":6,"max_pattern":4,"factor":8}`, seq, 16)
	if want := []int32{4, 5, 6, 7, 8}; !slices.Equal(res.Tokens, want) {
		t.Fatalf("got %v, want %v (depth 6 - match 1)", res.Tokens, want)
	}
}

func TestSuffixParams(t *testing.T) {
	for params, want := range map[string]string{
		`{"depth":1}`:                 "depth = 1",
		`{"depth":8,"max_pattern":8}`: "max_pattern = 8",
		`{"min_prob":2}`:              "min_prob",
		`{"offset":-1}`:               "offset = -1",
		`{"window":3}`:                `unknown field "window"`,
	} {
		if _, err := NewSuffix([]byte(params)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error containing %q", params, err, want)
		}
	}
}
