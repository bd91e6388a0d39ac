package builtin

import (
	"context"
	"slices"

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
	counts counter
}

var _ sdk.Penalty = (*Penalty)(nil)

// NewPenalty builds the penalty from JSON params.
func NewPenalty(params []byte) (*Penalty, error) {
	p := &Penalty{}
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

// Apply penalises each row's logits by the counts of its window. Consecutive verify
// rows usually differ by one drafted token (and, with a full window, the oldest token
// dropped), so the counts are updated from row to row rather than recounted.
func (p *Penalty) Apply(_ context.Context, rows []sdk.PenaltyRow) error {
	w := p.Window()
	var prev []int32
	for i := range rows {
		row := &rows[i]
		hist := row.History
		if len(hist) > w {
			hist = hist[len(hist)-w:]
		}
		switch n := len(prev); {
		case i > 0 && len(hist) == n+1 && slices.Equal(hist[:n], prev): // one more token
			p.counts.add(hist[n], 1)
		case i > 0 && n > 0 && len(hist) == n && slices.Equal(hist[:n-1], prev[1:]): // window slid by one
			p.counts.add(prev[0], -1)
			p.counts.add(hist[n-1], 1)
		default:
			p.counts.reset(len(hist) + len(rows))
			for _, t := range hist {
				p.counts.add(t, 1)
			}
		}
		prev = hist
		for j, id := range row.IDs {
			c := p.counts.get(id)
			if c <= 0 || j >= len(row.Logits) {
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

// counter counts tokens in an open-addressing table: Go maps are slow in WebAssembly,
// and a window holds at most a few thousand tokens.
type counter struct {
	keys  []uint32 // token+1; 0 = empty
	vals  []int32
	shift uint32
	used  []int32 // occupied slots, to clear them cheaply
}

func (c *counter) reset(n int) {
	size := 16
	for size < 2*n {
		size *= 2
	}
	if len(c.keys) < size {
		c.keys, c.vals, c.used = make([]uint32, size), make([]int32, size), c.used[:0]
	} else {
		for _, s := range c.used {
			c.keys[s] = 0
		}
		c.used = c.used[:0]
		size = len(c.keys)
	}
	c.shift = 32
	for s := size; s > 1; s >>= 1 {
		c.shift--
	}
}

func (c *counter) slot(t int32) int {
	mask := len(c.keys) - 1
	i := int((uint32(t)*0x9e3779b1)>>c.shift) & mask
	for c.keys[i] != 0 && c.keys[i] != uint32(t)+1 {
		i = (i + 1) & mask
	}
	return i
}

func (c *counter) add(t, n int32) {
	i := c.slot(t)
	if c.keys[i] == 0 {
		c.keys[i], c.vals[i] = uint32(t)+1, 0
		c.used = append(c.used, int32(i))
	}
	c.vals[i] += n
}

func (c *counter) get(t int32) int32 {
	if i := c.slot(t); c.keys[i] != 0 {
		return c.vals[i]
	}
	return 0
}
