//go:build cuda

package cuda_test

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minfer/minfer/core/backend"
)

// TestBenchModel measures a model file like llama-bench: pp = one forward of P prompt
// tokens from an empty cache (logits of the last row), tg = N single-token forwards from
// an empty cache (each waited for; also reported with the logits copied to the host and
// argmax taken there, as greedy decoding does), each the median of R repetitions; then the verify cost C_T(nt), the
// ms of one forward of nt rows with logits for every row at position P. It runs only
// when MINFER_BENCH_MODEL names a file (MINFER_BENCH="P,N,R", default 512,128,5).
// It reports times; it asserts nothing about them.
func TestBenchModel(t *testing.T) {
	path := os.Getenv("MINFER_BENCH_MODEL")
	if path == "" {
		t.Skip("MINFER_BENCH_MODEL not set")
	}
	P, N, R := 512, 128, 5
	if s := os.Getenv("MINFER_BENCH"); s != "" {
		f := strings.Split(s, ",")
		P, _ = strconv.Atoi(f[0])
		N, _ = strconv.Atoi(f[1])
		R, _ = strconv.Atoi(f[2])
	}
	g := open(t)
	defer g.Close()
	start := time.Now()
	m := loadOn(t, g, path)
	defer m.Close()
	t.Logf("loaded %s: %.2f GB of weights in %v", path, float64(m.WeightBytes)/1e9, time.Since(start).Round(time.Millisecond))
	kv, err := m.NewKV(P+N+64, backend.KVF16)
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	vocab := int32(m.Params.Vocab)
	prompt := make([]int32, P)
	for i := range prompt {
		prompt[i] = int32((i*7919 + 13) % int(vocab))
	}
	last := make([]float32, vocab)
	forward := func(ids []int32, all bool) {
		l, err := m.Forward(ids, kv, all)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.ReadLogits(l, make([]float32, l.Rows*l.Cols)); err != nil {
			t.Fatal(err)
		}
	}
	// Warm up: capture graphs for nt = P and nt = 1.
	forward(prompt, false)
	kv.Reset()
	forward(prompt[:1], false)
	kv.Reset()
	var pp, tg, tgRead []float64
	ledger := os.Getenv("MINFER_LEDGER") == "1"
	var ppLedger, tgLedger strings.Builder
	for range R {
		kv.Reset()
		g.ResetLedger()
		s := time.Now()
		forward(prompt, false)
		pp = append(pp, time.Since(s).Seconds())
		if ledger {
			ppLedger.Reset()
			g.WriteLedger(&ppLedger)
			g.ResetLedger()
		}
		kv.Reset()
		s = time.Now()
		for i := range N {
			// As llama-bench: decode steps, each waited for, no sampling or logits copy.
			if _, err := m.Forward([]int32{prompt[i%P]}, kv, false); err != nil {
				t.Fatal(err)
			}
		}
		tg = append(tg, time.Since(s).Seconds())
		// The same with the host argmax over the logits (the engine's greedy path).
		kv.Reset()
		tok := int32(1)
		s = time.Now()
		for range N {
			l, err := m.Forward([]int32{tok}, kv, false)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.ReadLogits(l, last); err != nil {
				t.Fatal(err)
			}
			tok = argmax(last)
		}
		tgRead = append(tgRead, time.Since(s).Seconds())
		if ledger {
			tgLedger.Reset()
			g.WriteLedger(&tgLedger)
		}
	}
	med := func(v []float64) float64 { v = slices.Clone(v); slices.Sort(v); return v[len(v)/2] }
	if ledger {
		t.Logf("ledger of one pp%d:\n%s", P, ppLedger.String())
		t.Logf("ledger of one tg%d:\n%s", N, tgLedger.String())
	}
	t.Logf("RESULT %s pp%d %.1f t/s (median %.2f ms) tg%d %.1f t/s (median %.3f ms/token; with logits read + host argmax %.1f t/s)",
		path, P, float64(P)/med(pp), 1e3*med(pp), N, float64(N)/med(tg), 1e3*med(tg)/float64(N), float64(N)/med(tgRead))
	// Verify cost curve at position P.
	var curve []string
	for nt := 1; nt <= 16; nt++ {
		ids := prompt[:nt]
		var ts []float64
		for range max(R, 5) + 1 {
			kv.Reset()
			if err := kv.Append(P); err != nil { // pretend a P-token prefix
				t.Fatal(err)
			}
			s := time.Now()
			forward(ids, true)
			ts = append(ts, time.Since(s).Seconds())
		}
		curve = append(curve, fmt.Sprintf("%d: %.2f", nt, 1e3*med(ts[1:])))
	}
	t.Logf("RESULT verify C_T(nt) ms: %s", strings.Join(curve, " · "))
}
