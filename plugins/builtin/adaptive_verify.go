package builtin

// The adaptive policy's verify-cost estimates: by forward size, alone and in a batch.

// maxBatchSeqs and maxBatchRows bound the batch the adaptive policy believes an
// outcome's BatchSeqs and BatchRows (a misbehaving host could say anything, and the
// estimates keep a window per forward size; minfer's batches stay far below).
const (
	maxBatchSeqs = 4096
	maxBatchRows = 8192
)

// staleAfter is how many rounds a verify measurement of a forward size stays the
// estimate of that size without being renewed. Past it the size counts as not
// measured (see verifyEstimates), so it scores on the measurements around it and is
// tried again: verify rows that became cheaper mid-request (other sequences left the
// batch, the GPU's clocks rose) would otherwise keep the depths not played since at
// their old, dear cost, and the policy would never deepen.
func (a *Adaptive) staleAfter() int { return 64 * a.p.Window }

// growRows makes room for verify forwards of n-1 rows.
func (a *Adaptive) growRows(n int) {
	for len(a.verify) < n {
		a.verify = append(a.verify, newRing(a.p.Window))
		a.seen = append(a.seen, 0)
	}
}

// verifyEstimates fills a.est[nt] for nt = 1..maxNT, the verify cost charged to a round
// of nt rows, from the measured minima by forward size. A size not measured yet, or
// larger than every size measured lately and whose measurement went stale
// (staleAfter), gets the optimistic lower bound that monotonicity allows (verify cost
// does not fall as rows grow): the nearest measurement below it, or 0 below every
// measurement; so it scores well and gets tried once. (A stale size below a fresh one
// keeps its measurement: the cap below makes it no dearer than the fresh one.) Since
// timings only err upwards, every estimate is also capped by the estimates of larger
// sizes. The estimates change only when a verify window's minimum does, a measurement
// goes stale or the batch changes, so score calls this only then (or when the bound
// changes).
//
// Batched (continuous batching: the forward also ran the rows of seqs−1 other
// sequences), a round's rows delay every sequence of the batch, and the others' rows
// are no fixed cost: they draft by the same reckoning. So a depth is scored as if the
// batch's sequences all chose it, as a batch of like requests would,
//
//	est[nt] = V(seqs·nt) = V0 + row·seqs·nt,
//
// which makes a depth pay in the batch's tokens per second, not this sequence's alone:
// taking the others' rows as given instead (V(others+nt)), each sequence finds its
// own rows cheap beside theirs, and all of them drafting deep is where that leads. V
// is the least-squares line, V(R) = V0 + row·R with row ≥ 0, through the minima of the
// sizes measured lately: the forward's size moves with what every sequence drafts, so
// most sizes are measured rarely or never, and the per-size optimism that explores one
// sequence's depths would read the gaps between them as free rows. Where rows are free
// (a memory-bound GPU at a small batch) row is nothing and the depth stays; as the
// batch grows and rows start to cost, depth falls. Alone, est is the per-size
// estimate.
func (a *Adaptive) verifyEstimates(maxNT int) {
	o, b := a.others, a.seqs
	if o > 0 || b > 1 {
		a.batchEstimates(maxNT)
		return
	}
	n := o + maxNT + 1
	a.growRows(n)
	a.rows = resize(a.rows, n)
	v, below, stale := a.rows, 0.0, a.rounds-a.staleAfter()
	fresh := 0 // the largest size measured lately: stale sizes below it stay, capped by it
	for r := range v {
		if _, ok := a.verify[r].min(); ok && a.seen[r] >= stale {
			fresh = r
		}
	}
	for r := range v {
		if x, ok := a.verify[r].min(); ok && (r < fresh || a.seen[r] >= stale) {
			below = x
		}
		v[r] = below
	}
	for r := n - 2; r >= 0; r-- {
		if v[r+1] < v[r] {
			v[r] = v[r+1]
		}
	}
	a.est = resize(a.est, maxNT+1)
	copy(a.est, v)
	a.estFresh, a.estOthers, a.estSeqs = true, o, b
}

// batchEstimates is verifyEstimates in a batch: the least-squares line through the
// minima of the sizes measured lately, each weighted by its measurements in the window
// (a minimum of one measurement carries all its noise: timings err upwards).
func (a *Adaptive) batchEstimates(maxNT int) {
	b := a.seqs
	stale := a.rounds - a.staleAfter()
	var n, sr, sv, srr, srv float64
	for r := range a.verify {
		if x, ok := a.verify[r].min(); ok && a.seen[r] >= stale {
			w, fr := float64(a.verify[r].n), float64(r)
			n, sr, sv, srr, srv = n+w, sr+w*fr, sv+w*x, srr+w*fr*fr, srv+w*fr*x
		}
	}
	v0, row := 0.0, 0.0
	if n > 0 {
		v0 = sv / n
		if d := n*srr - sr*sr; d > 0 {
			row = atLeast((n*srv-sr*sv)/d, 0)
			v0 = (sv - row*sr) / n
		}
	}
	a.est = resize(a.est, maxNT+1)
	for nt := range a.est {
		a.est[nt] = atLeast(v0+row*float64(b*nt), 0)
	}
	a.v0, a.row = v0, row
	a.estFresh, a.estOthers, a.estSeqs = true, a.others, b
}

// probePays reports whether a round of depth d whose every draft token is accepted
// beats a plain round by more than the hysteresis, step being the draft step's time:
// the ceiling of what a probe from depth 0 can find (draftingCanPay).
//
// Alone, with the per-size estimates. In a batch, a probe is priced by what it costs
// the batch: a parked sequence probes on its own (the others decode plainly), and its
// draft steps and rows delay every sequence of the batch (the host's step waits for
// the probe's verify), so the round is worth it only where the batch's tokens per
// second rise:
//
//	(o + d + 1) / (d·step + V(o + d + 1))  >  (1 + hysteresis) · (o + 1) / V(o + 1)
//
// with o the other sequences' rows and V the batch's verify line. Charging the probe
// as if every sequence drafted with it (est) makes its draft steps the batch's, shared
// by all, and its rows cheap: with rows that cost (issue 21: a 7B Q4_K_M on the H200,
// ~0.7 ms a row at 4 sequences) parked sequences went on probing round after round
// where no probe could pay the batch back.
func (a *Adaptive) probePays(d int, step float64) bool {
	if a.others <= 0 && a.seqs <= 1 {
		return float64(d+1)/(float64(d)*step+a.est[d+1]) > (1+a.p.Hysteresis)/a.est[1]
	}
	if !a.estFresh || a.estOthers != a.others || a.estSeqs != a.seqs {
		a.batchEstimates(len(a.est) - 1)
	}
	o := float64(a.others)
	v := func(r float64) float64 { return atLeast(a.v0+a.row*r, 1) }
	with := o + float64(d+1)
	return with/(float64(d)*step+v(with)) > (1+a.p.Hysteresis)*(o+1)/v(o+1)
}

// ring keeps the last n values and their minimum (recomputed only when the minimum
// leaves the window: plain comparisons, since every call costs in WebAssembly).
type ring struct {
	v    []float64
	next int
	n    int
	lo   float64
}

func newRing(n int) ring { return ring{v: make([]float64, n)} }

// push adds x, dropping the oldest value once the window is full, and reports whether
// the minimum changed.
func (r *ring) push(x float64) bool {
	lo, n := r.lo, r.n
	old := r.v[r.next]
	r.v[r.next] = x
	r.next++
	if r.next == len(r.v) {
		r.next = 0
	}
	switch {
	case r.n < len(r.v):
		r.n++
		if r.n == 1 || x < r.lo {
			r.lo = x
		}
	case x <= r.lo:
		r.lo = x
	case old == r.lo: // the minimum left the window
		r.lo = r.v[0]
		for _, y := range r.v[1:] {
			if y < r.lo {
				r.lo = y
			}
		}
	}
	return n == 0 || r.lo != lo
}

func (r *ring) min() (float64, bool) { return r.lo, r.n > 0 }
