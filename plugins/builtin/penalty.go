package builtin

import (
	"context"

	"github.com/minfer/minfer/sdk"
)

// Penalty is llama.cpp's penalties sampler over the last repeat_last_n tokens: for each
// token seen c > 0 times in the window, its logit l becomes
//
//	l·repeat_penalty if l ≤ 0, else l/repeat_penalty; then l − c·frequency_penalty − presence_penalty
//
// The host calls it per verify row with that row's window (accepted tokens and the
// drafted tokens before the row), so drafted tokens are penalised exactly as if they
// had been emitted one by one.
//
// Params (JSON): repeat_penalty (1 = off), repeat_last_n (64; 0 = off, -1 = the whole
// context), presence_penalty (0), frequency_penalty (0). With all three penalties off the
// window is 0 and the engine skips the call.
type Penalty struct {
	p struct {
		Repeat    float64 `json:"repeat_penalty"`
		LastN     int     `json:"repeat_last_n"`
		Presence  float64 `json:"presence_penalty"`
		Frequency float64 `json:"frequency_penalty"`
	}
	counts map[int32]int32
}

var _ sdk.Penalty = (*Penalty)(nil)

// NewPenalty builds the penalty from JSON params.
func NewPenalty(params []byte) (*Penalty, error) {
	p := &Penalty{counts: map[int32]int32{}}
	p.p.Repeat, p.p.LastN = 1, 64
	if err := decodeParams("penalty", params, &p.p); err != nil {
		return nil, err
	}
	for _, c := range []struct {
		key       string
		v, lo, hi float64
	}{
		{"repeat_penalty", p.p.Repeat, 1e-3, 1e3},
		{"repeat_last_n", float64(p.p.LastN), -1, 1 << 30},
		{"presence_penalty", p.p.Presence, -1e3, 1e3},
		{"frequency_penalty", p.p.Frequency, -1e3, 1e3},
	} {
		if err := checkRange("penalty", c.key, c.v, c.lo, c.hi); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Window is repeat_last_n (the whole context for -1), or 0 when every penalty is off.
func (p *Penalty) Window() int {
	if p.p.Repeat == 1 && p.p.Presence == 0 && p.p.Frequency == 0 {
		return 0
	}
	if p.p.LastN < 0 {
		return 1 << 30
	}
	return p.p.LastN
}

// Apply penalises each row's logits by the counts of its window.
func (p *Penalty) Apply(_ context.Context, rows []sdk.PenaltyRow) error {
	w := p.Window()
	for i := range rows {
		row := &rows[i]
		hist := row.History
		if len(hist) > w {
			hist = hist[len(hist)-w:]
		}
		clear(p.counts)
		for _, t := range hist {
			p.counts[t]++
		}
		for j, id := range row.IDs {
			c := p.counts[id]
			if c == 0 || j >= len(row.Logits) {
				continue
			}
			l := row.Logits[j]
			if l <= 0 {
				l *= float32(p.p.Repeat)
			} else {
				l /= float32(p.p.Repeat)
			}
			row.Logits[j] = l - (float32(c)*float32(p.p.Frequency) + float32(p.p.Presence))
		}
	}
	return nil
}
