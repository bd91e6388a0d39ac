package engine

import (
	"errors"
	"fmt"
	"strings"

	"github.com/minfer/minfer/core/gguf"
)

// Vocabulary compatibility of a draft with its target, as llama.cpp's speculative
// decoding checks it: sizes within maxVocabDiff, the same BOS/EOS ids, and the same
// token text for every id from vocabCheckStart on (the first ids are often control
// tokens that differ harmlessly).
const (
	maxVocabDiff    = 128
	vocabCheckStart = 5
)

// CheckVocab reports whether a draft model file can propose tokens for a target: it
// returns an error naming the difference (with up to three example ids) if not.
func CheckVocab(target, draft *gguf.File) error {
	tt, err := target.GetStrings("tokenizer.ggml.tokens")
	if err != nil {
		return fmt.Errorf("engine: target vocabulary: %w", err)
	}
	dt, err := draft.GetStrings("tokenizer.ggml.tokens")
	if err != nil {
		return fmt.Errorf("engine: draft vocabulary: %w", err)
	}
	if d := len(tt) - len(dt); d > maxVocabDiff || d < -maxVocabDiff {
		return fmt.Errorf("engine: draft vocabulary has %d tokens, target %d (more than %d apart)", len(dt), len(tt), maxVocabDiff)
	}
	for _, k := range []string{"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"} {
		a, errA := target.GetUint(k)
		b, errB := draft.GetUint(k)
		if errors.Is(errA, gguf.ErrNotFound) != errors.Is(errB, gguf.ErrNotFound) || a != b {
			return fmt.Errorf("engine: draft and target differ in %s (%d vs %d)", k, b, a)
		}
	}
	var diffs []string
	n := 0
	for i := vocabCheckStart; i < min(len(tt), len(dt)); i++ {
		if tt[i] != dt[i] {
			n++
			if len(diffs) < 3 {
				diffs = append(diffs, fmt.Sprintf("id %d: target %q, draft %q", i, tt[i], dt[i]))
			}
		}
	}
	if n > 0 {
		return fmt.Errorf("engine: draft and target vocabularies differ in %d token(s), e.g. %s", n, strings.Join(diffs, "; "))
	}
	return nil
}
