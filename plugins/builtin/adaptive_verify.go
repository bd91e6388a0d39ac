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
	a.v0, a.row = v0, row
	a.est = resize(a.est, maxNT+1)
	if a.p.BatchTable {
		a.batchTable(b*maxNT + 1)
		for nt := range a.est {
			a.est[nt] = a.rows[b*nt]
		}
	} else {
		for nt := range a.est {
			a.est[nt] = atLeast(v0+row*float64(b*nt), 0)
		}
	}
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
	if a.p.BatchTable {
		v = func(r float64) float64 { return atLeast(a.batchV(r), 1) }
	}
	with := o + float64(d+1)
	return with/(float64(d)*step+v(with)) > (1+a.p.Hysteresis)*(o+1)/v(o+1)
}

// batchTable (batch_table) fills a.rows[R] for R < n, the batch's verify cost of a
// forward of R rows: the minimum measured lately where R was measured, linear between
// the measured sizes around it, the smallest measured size's below it, and in
// proportion to the largest measured size past it (rows past the measured ones cost
// as much as those did on average); then capped by every larger size's (timings err
// upwards). With no size measured lately, the line.
//
// Why not the line: a GPU's verify cost steps with its kernels' tiles (the H200's 7B
// target: 5.77 ms at 8 rows, 7.63 at 9, 8.16 at 16, 12.73 at 17), which no line
// follows, and the sizes a batch's forwards take (its sequences' rows together) are
// few. Why no optimism past the measured sizes, as a sequence alone has: a depth
// untried by the batch pays only if every sequence tries it in the same step, and
// sequences that try it one at a time measure the sizes between, at the cost of the
// whole batch (docs/perf-server.md). So a batch drafts at the depth its measured
// forwards say pays, and parks when depth 0 pays more: below the smallest size
// measured a forward costs no less than that size's, so that one unlucky round does
// not park a sequence alone while the others draft.
func (a *Adaptive) batchTable(n int) {
	a.growRows(n)
	a.rows = resize(a.rows, n)
	v := a.rows
	stale := a.rounds - a.staleAfter()
	lo, lov := -1, 0.0
	for r := range v {
		x, ok := a.verify[r].min()
		if !ok || a.seen[r] < stale {
			continue
		}
		for q := lo + 1; q < r; q++ {
			v[q] = x // below the smallest measured size
			if lo >= 0 {
				v[q] = lov + (x-lov)*float64(q-lo)/float64(r-lo)
			}
		}
		v[r], lo, lov = x, r, x
	}
	if lo <= 0 {
		for r := range v {
			v[r] = atLeast(a.v0+a.row*float64(r), 0)
		}
		return
	}
	for q := lo + 1; q < n; q++ {
		v[q] = lov * float64(q) / float64(lo)
	}
	for r := n - 2; r >= 0; r-- {
		if v[r+1] < v[r] {
			v[r] = v[r+1]
		}
	}
}

// batchV is the batch table's verify cost of a forward of r ≥ 0 rows, fractional
// (linear between whole sizes), past the table in proportion to its last size.
func (a *Adaptive) batchV(r float64) float64 {
	v := a.rows
	n := len(v)
	if n < 2 {
		return atLeast(a.v0+a.row*r, 0)
	}
	if r >= float64(n-1) {
		return v[n-1] * r / float64(n-1)
	}
	i := int(r)
	return v[i] + (v[i+1]-v[i])*(r-float64(i))
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
