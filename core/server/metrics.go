package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/minfer/minfer/core/engine"
)

// metrics are the server's Prometheus series, on a registry of their own.
type metrics struct {
	reg        *prometheus.Registry
	requests   *prometheus.CounterVec
	promptTok  prometheus.Counter
	genTok     prometheus.Counter
	ttft       prometheus.Histogram
	tpot       prometheus.Histogram
	itl        prometheus.Histogram
	tps        prometheus.Histogram
	batchSeqs  *prometheus.HistogramVec
	batchRows  *prometheus.HistogramVec
	forwardSec *prometheus.HistogramVec
	queue      prometheus.Gauge
	inflight   prometheus.Gauge
	rounds     prometheus.Counter
	drafted    *prometheus.CounterVec
	accepted   *prometheus.CounterVec
	depthRound *prometheus.CounterVec
	drFailed   *prometheus.CounterVec
	drOff      *prometheus.CounterVec
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "minfer_requests_total", Help: "HTTP API requests by endpoint and status code.",
		}, []string{"endpoint", "code"}),
		promptTok: prometheus.NewCounter(prometheus.CounterOpts{Name: "minfer_prompt_tokens_total", Help: "Prompt tokens processed."}),
		genTok:    prometheus.NewCounter(prometheus.CounterOpts{Name: "minfer_completion_tokens_total", Help: "Tokens generated."}),
		ttft: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "minfer_time_to_first_token_seconds", Help: "Time from a request's start to its first generated token.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
		}),
		tpot: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "minfer_time_per_output_token_seconds", Help: "Mean time between a request's generated tokens after the first (inter-token latency).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		itl: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "minfer_inter_token_latency_seconds",
			Help: "Time between successive pieces of a reply's text as the engine emits them, streamed or not: what a streaming client waits between chunks " +
				"(a decoding step's wait behind other requests' prompts shows here, not in a request's mean; the tokens of one speculative round come together).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		batchSeqs: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "minfer_batch_sequences", Help: "Sequences served by each forward (continuous batching), by model: target or draft.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64},
		}, []string{"model"}),
		batchRows: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "minfer_batch_rows", Help: "Rows (tokens) of each forward, by model: target or draft.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 13),
		}, []string{"model"}),
		forwardSec: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "minfer_forward_seconds",
			Help: "Time of each forward (continuous batching), its logits' hand-over included, by model: target or draft. " +
				"rate(minfer_forward_seconds_sum) is the share of time the models computed; the rest of the wall time went to host work (plugins, HTTP) and waiting.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}, []string{"model"}),
		tps: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "minfer_generation_tokens_per_second", Help: "Generation speed per request.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 14),
		}),
		queue:    prometheus.NewGauge(prometheus.GaugeOpts{Name: "minfer_queue_depth", Help: "Requests waiting for a free slot."}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{Name: "minfer_requests_in_flight", Help: "Requests running on a slot."}),
		rounds:   prometheus.NewCounter(prometheus.CounterOpts{Name: "minfer_spec_rounds_total", Help: "Speculative rounds (plain decoding steps count as depth-0 rounds)."}),
		drafted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "minfer_spec_drafted_tokens_total", Help: "Draft tokens proposed, by round depth.",
		}, []string{"depth"}),
		accepted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "minfer_spec_accepted_tokens_total", Help: "Draft tokens accepted, by round depth (acceptance = accepted / drafted).",
		}, []string{"depth"}),
		depthRound: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "minfer_spec_rounds_by_depth_total", Help: "Speculative rounds by depth.",
		}, []string{"depth"}),
		drFailed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "minfer_drafter_failures_total", Help: "Failed drafter plugin calls (an error, trap, timeout or hostile answer), by drafter; each one's round fell back to the draft model or plain decoding.",
		}, []string{"drafter"}),
		drOff: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "minfer_drafter_off_total", Help: "Requests in which a drafter plugin was turned off after failing (a drafter is off at its first failure), by drafter.",
		}, []string{"drafter"}),
	}
	m.reg.MustRegister(m.requests, m.promptTok, m.genTok, m.ttft, m.tpot, m.itl, m.tps, m.batchSeqs, m.batchRows, m.forwardSec, m.queue, m.inflight,
		m.rounds, m.drafted, m.accepted, m.depthRound, m.drFailed, m.drOff)
	// The standard process and Go runtime series (process_cpu_seconds_total,
	// process_resident_memory_bytes, go_goroutines, GC): CPU seconds per completion
	// token is a server's cost that a shared machine's load disturbs less than tokens/s.
	m.reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewGoCollector())
	return m
}

// poolGauges reports the KV pool's use at each scrape.
func (m *metrics) poolGauges(p KVPool) {
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "minfer_kv_pool_bytes", Help: "KV memory budget of the slots' block pool."},
			func() float64 { return float64(p.Bytes()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "minfer_kv_pool_used_bytes", Help: "KV memory of the pool's budget in use: blocks the slots' caches hold (a block shared by several slots once) or reserved for what their requests may still write (running and idle slots; an idle slot's blocks are taken back when needed)."},
			func() float64 { return float64(p.UsedBytes()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "minfer_kv_pool_physical_bytes", Help: "KV memory of the blocks the slots' caches hold, a block shared by several slots (a common prompt prefix) counted once; reservations not yet written excluded."},
			func() float64 { return float64(p.PhysicalBytes()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "minfer_kv_pool_shared_bytes", Help: "KV memory that prefix sharing saves: the shared blocks counted once more for each further slot holding them."},
			func() float64 { return float64(p.SharedBytes()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "minfer_kv_pool_used_ratio", Help: "Share of the KV pool's blocks in use (held or reserved; with paged caches, of the fullest model's arena)."},
			func() float64 { return float64(p.Used()) / float64(p.Blocks()) }))
}

// pagedGauge reports the paged caches' arena use at each scrape.
func (m *metrics) pagedGauge(p KVPaged) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "minfer_kv_paged_used_bytes",
		Help: "KV memory the slots' paged caches hold in their arenas, a block shared by several slots (a common prompt prefix) counted once."},
		func() float64 { return float64(p.UsedBytes()) }))
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// ObserveForward records one forward of model ("target" or "draft") serving seqs
// sequences in rows rows, which took d (engine.Batching.Observe). The label keeps the
// target's batch sizes apart from the draft's: a speculative server's draft forwards
// serve only the sessions that draft, so one histogram of both hid how full the
// target's steps were.
func (s *Server) ObserveForward(model string, seqs, rows int, d time.Duration) {
	s.metrics.batchSeqs.WithLabelValues(model).Observe(float64(seqs))
	s.metrics.batchRows.WithLabelValues(model).Observe(float64(rows))
	s.metrics.forwardSec.WithLabelValues(model).Observe(d.Seconds())
}

// interToken returns onText (nil: none) observing the time between the calls that
// bring text, for the inter-token latency histogram.
func (m *metrics) interToken(onText func(string) error) func(string) error {
	var last time.Time
	return func(text string) error {
		if text != "" {
			now := time.Now()
			if !last.IsZero() {
				m.itl.Observe(now.Sub(last).Seconds())
			}
			last = now
		}
		if onText == nil {
			return nil
		}
		return onText(text)
	}
}

// observe records a finished generation.
func (m *metrics) observe(res *engine.Result) {
	m.promptTok.Add(float64(res.PromptTokens))
	m.genTok.Add(float64(len(res.Tokens)))
	if res.Timings.TTFTMs > 0 {
		m.ttft.Observe(res.Timings.TTFTMs / 1000)
	}
	if res.Timings.GenTPS > 0 {
		m.tps.Observe(res.Timings.GenTPS)
		m.tpot.Observe(1 / res.Timings.GenTPS)
	}
	m.rounds.Add(float64(res.Spec.Rounds))
	for name, st := range res.Spec.ByDrafter {
		if st.Failed > 0 {
			m.drFailed.WithLabelValues(name).Add(float64(st.Failed))
		}
		if st.Off {
			m.drOff.WithLabelValues(name).Inc()
		}
	}
	for d, st := range res.Spec.ByDepth {
		depth, err := strconv.Atoi(d)
		if err != nil {
			continue
		}
		m.depthRound.WithLabelValues(d).Add(float64(st.Rounds))
		m.drafted.WithLabelValues(d).Add(float64(depth * st.Rounds))
		m.accepted.WithLabelValues(d).Add(float64(st.Accepted))
	}
}
