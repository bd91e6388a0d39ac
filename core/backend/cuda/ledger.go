package cuda

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/minfer/minfer/cuda/driver"
)

// ledger times every kernel with CUDA events when MINFER_LEDGER=1 (graphs are then
// off, so each op is a separate launch): the profiling mode behind a per-kernel table.
type ledger struct {
	on      bool
	paused  bool // PauseLedger: launches run untimed
	pending []timed
	free    []*driver.Event
	stats   map[string]*KernelStat
}

type timed struct {
	name       string
	start, end *driver.Event
	host       bool // a library call: see KernelStat.HostInCall
}

// KernelStat is one kernel's share of the time measured in ledger mode: the time between
// events recorded on the stream just before and just after its launch call. Where the
// GPU had nothing queued when the call began, that includes the host's launch latency
// (ledger mode runs without graphs).
type KernelStat struct {
	Name  string
	Calls int
	MS    float64 // total milliseconds between the events
	// HostInCall marks a library call (cuBLAS) rather than one kernel launch: the events
	// bracket the whole host call, so its time also holds the host's work inside the call
	// (cuBLAS's heuristics and checks) while the GPU waited, not only the GPU's time.
	HostInCall bool
}

func (l *ledger) event() *driver.Event {
	if n := len(l.free); n > 0 {
		e := l.free[n-1]
		l.free = l.free[:n-1]
		return e
	}
	e, err := driver.NewEvent()
	if err != nil {
		return nil
	}
	return e
}

// timedLaunch records events before and after launch when the ledger is on.
func (b *Backend) timedLaunch(name string, launch func()) { b.timed(name, false, launch) }

// timedLibCall is timedLaunch for a library call that does host work between the events
// (KernelStat.HostInCall).
func (b *Backend) timedLibCall(name string, call func()) { b.timed(name, true, call) }

func (b *Backend) timed(name string, host bool, launch func()) {
	if !b.led.on || b.led.paused || b.capturing {
		launch()
		return
	}
	s, e := b.led.event(), b.led.event()
	if s == nil || e == nil {
		launch()
		return
	}
	s.Record(b.stream)
	launch()
	e.Record(b.stream)
	b.led.pending = append(b.led.pending, timed{name: name, start: s, end: e, host: host})
}

// settle folds finished events into the stats (call after a stream sync).
func (b *Backend) settle() {
	if len(b.led.pending) == 0 {
		return
	}
	if b.led.stats == nil {
		b.led.stats = map[string]*KernelStat{}
	}
	for _, t := range b.led.pending {
		ms, err := driver.Elapsed(t.start, t.end)
		if err == nil {
			k := t.name
			// Group instantiations: mmvq_q4_k_3 → mmvq_q4_k.
			if strings.HasPrefix(k, "mmvq_") {
				k = k[:strings.LastIndexByte(k, '_')]
			}
			st := b.led.stats[k]
			if st == nil {
				st = &KernelStat{Name: k}
				b.led.stats[k] = st
			}
			st.Calls++
			st.MS += float64(ms)
			st.HostInCall = st.HostInCall || t.host
		}
		b.led.free = append(b.led.free, t.start, t.end)
	}
	b.led.pending = b.led.pending[:0]
}

// Ledger returns the per-kernel times measured since Open (or the last ResetLedger),
// largest first; empty unless MINFER_LEDGER=1.
func (b *Backend) Ledger() []KernelStat {
	var out []KernelStat
	for _, s := range b.led.stats {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(x, y KernelStat) int {
		switch {
		case x.MS > y.MS:
			return -1
		case x.MS < y.MS:
			return 1
		}
		return strings.Compare(x.Name, y.Name)
	})
	return out
}

// PauseLedger(true) leaves the launches that follow out of the ledger until
// PauseLedger(false): bench's depth fill, which is not part of the test it precedes.
func (b *Backend) PauseLedger(p bool) { b.led.paused = p }

// ResetLedger clears the measured times.
func (b *Backend) ResetLedger() { b.led.stats = nil }

// WriteLedger prints the ledger as a table: ms and share per kernel. A library call's
// row (KernelStat.HostInCall) is marked with † and explained under the table.
func (b *Backend) WriteLedger(w io.Writer) {
	st := b.Ledger()
	var total float64
	lib := false
	for _, s := range st {
		total += s.MS
		lib = lib || s.HostInCall
	}
	fmt.Fprintf(w, "%-22s %8s %10s %9s %6s\n", "kernel", "calls", "ms", "µs/call", "%")
	for _, s := range st {
		name := s.Name
		if s.HostInCall {
			name += " †"
		}
		fmt.Fprintf(w, "%-22s %8d %10.3f %9.2f %5.1f%%\n", name, s.Calls, s.MS, 1e3*s.MS/float64(s.Calls), 100*s.MS/total)
	}
	fmt.Fprintf(w, "%-22s %8s %10.3f\n", "total", "", total)
	if lib {
		fmt.Fprintf(w, "† a library call: the time includes the host's work inside the call while the GPU waited, not only GPU time\n")
	}
}

func ledgerOn() bool { return os.Getenv("MINFER_LEDGER") == "1" }
