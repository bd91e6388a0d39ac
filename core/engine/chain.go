package engine

import (
	"context"
	"errors"
	"os"
)

// noDraftChain is MINFER_NO_DRAFT_CHAIN=1: every draft step of the draft model waits
// for the host to read its token (the per-step path), so that a wrong result can be
// bisected to the chain.
var noDraftChain = os.Getenv("MINFER_NO_DRAFT_CHAIN") == "1"

// chainAtOnce (tests) runs draft chains also on a backend that executes each op at
// once (the CPU, the chain's reference), where they are otherwise not used.
var chainAtOnce = false

// chainCuts (tests) runs draft chains also in rounds with a min_conf cut-off, where
// they are otherwise not used: a chain runs every step of the round's depth and cuts
// afterwards, and the adaptive policy's depth with its automatic cut-off is a cap the
// cut usually ends well before. On the H200 drafter bed (trained pair, 965ac09, 15:55
// UTC) that made the draft model's rounds cost 0.190 ms of drafting against 0.094 at
// 0871b61 (per step), 0.88× plain decoding instead of 1.13×: a round that kept one
// token ran 302 µs of draft steps. The host round trip a chain saves is ~1% of a 0.5B
// step (0.840 ms a step chained, 0.833-0.838 per step, same run).
var chainCuts = false

// chain returns the draft model's sequence when this round's draft steps run as one
// chain on the device (model.DraftChain): a round without a min_conf cut-off (see
// chainCuts), a real model alone on its backend (batched
// sessions draft in lockstep, one forward per step for all of them, which the host
// schedules), on a backend that picks and feeds the tokens itself and queues its ops
// (Caps.Queued: where ops run at once there is no round trip to save, and a chain
// would run the steps past a min_conf cut for nothing).
func (g *gen) chain(minConf float32) (*seq, bool) {
	sq, ok := g.s.draft.(*seq)
	if !ok || noDraftChain || sq.b != nil || !sq.m.HasDraftChain() || minConf > 0 && !chainCuts {
		return nil, false
	}
	if !chainAtOnce && !sq.m.Backend().Caps().Queued {
		return nil, false
	}
	return sq, true
}

// draftChain is draftTokens' loop as one chain: ids (the tokens the draft's cache
// lacks) are fed as draftNext feeds them — in the warmed forward sizes and in
// forwards of at most the session's batch, all but the last filling the cache only —
// and the last of them starts a chain of d steps. The min_conf cut is applied to the
// d picks afterwards, exactly as the per-step loop applies it as it goes; the steps
// past the cut were run for nothing, and their cache entries go with the round's
// rollback (the draft keeps only what the target accepts).
func (g *gen) draftChain(sq *seq, ids []int32, d int, minConf float32, keepCut bool) error {
	s := g.s
	ctx := context.Background()
	ids, err := s.feedWarmed(ctx, sq, ids)
	if err != nil {
		return err
	}
	if ids, err = feedAllButLast(ctx, sq, ids, s.batch); err != nil {
		return err
	}
	if sq.c == nil {
		return errors.New("BUG: engine: draft chain on a pooled cache before its blocks were taken")
	}
	sq.seqs, sq.rows = 1, len(ids)
	mu := backendLock(sq.m.Backend())
	mu.Lock()
	err = sq.m.DraftChain(ids, sq.c, d, &sq.chain)
	mu.Unlock()
	if err != nil {
		return err
	}
	ch := &sq.chain
	for i, tok := range ch.IDs {
		if !g.keepDraft(tok, prob(ch.Vals[i], ch.LSE[i]), minConf, keepCut) {
			break
		}
	}
	return nil
}

// keepDraft appends a draft token of confidence p (the draft model's probability, or a
// drafter plugin's confidence) to the round's drafts unless p is below minConf (then
// only when keepCut), and reports whether drafting goes on.
func (g *gen) keepDraft(tok int32, p, minConf float32, keepCut bool) bool {
	cut := minConf > 0 && p < minConf
	if cut && !keepCut {
		return false
	}
	g.drafts, g.conf = append(g.drafts, tok), append(g.conf, p)
	return !cut
}
