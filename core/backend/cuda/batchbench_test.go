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
	"github.com/minfer/minfer/core/kv"
	"github.com/minfer/minfer/core/model"
)

// TestBenchBatch measures the batched decode step the server's scheduler runs: one
// model.ForwardBatch of S sequences × R tokens (S = 1, 8, 32 and R = 1, or the sizes
// of MINFER_BENCH_BATCH, e.g. "1,2,4,8", and MINFER_BENCH_BATCH_ROWS: R = 2 is a
// draft model's catch-up after an accepted depth-1 round), each sequence at position
// 128 of its own cache of 4096 positions (a chat turn; the cache size sets the
// attention's splits as a server slot's does), last-row logits, waited for. It reports
// the median ms of a step and the aggregate tokens/s (S per step); a step of S should
// cost little more than a step of 1 (the weights are read once for all rows). With
// MINFER_LEDGER=1 it logs each size's per-kernel ledger (graphs are then off). It runs
// only when MINFER_BENCH_MODEL names a file; it asserts nothing about the times.
func TestBenchBatch(t *testing.T) {
	path := os.Getenv("MINFER_BENCH_MODEL")
	if path == "" {
		t.Skip("MINFER_BENCH_MODEL not set")
	}
	const pos, ctx, steps = 128, 4096, 64
	sizes, rows := []int{1, 8, 32}, 1
	if v := os.Getenv("MINFER_BENCH_BATCH"); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				t.Fatalf("MINFER_BENCH_BATCH=%q: want sizes ≥ 1, comma-separated", v)
			}
			sizes = append(sizes, n)
		}
	}
	if v := os.Getenv("MINFER_BENCH_BATCH_ROWS"); v != "" {
		var err error
		if rows, err = strconv.Atoi(v); err != nil || rows < 1 {
			t.Fatalf("MINFER_BENCH_BATCH_ROWS=%q: want a count ≥ 1", v)
		}
	}
	ledger := os.Getenv("MINFER_LEDGER") == "1"
	g := open(t)
	defer g.Close()
	m := loadOn(t, g, path)
	defer m.Close()
	var caches []*kv.Cache
	defer func() {
		for _, c := range caches {
			c.Close()
		}
	}()
	var res []string
	for _, S := range sizes {
		for len(caches) < S {
			c, err := m.NewKV(ctx, backend.KVF16)
			if err != nil {
				t.Fatal(err)
			}
			caches = append(caches, c)
		}
		seqs := make([]model.Seq, S)
		for j := range seqs {
			ids := make([]int32, rows)
			for i := range ids {
				ids[i] = int32(1 + j + i)
			}
			seqs[j] = model.Seq{IDs: ids, Cache: caches[j], Out: model.OutLast}
		}
		var ts []float64
		for i := range steps + 2 { // the first two are warm-up (a graph capture for S = 1)
			if i%16 == 0 {
				for _, c := range caches[:S] {
					c.Reset()
					if err := c.Append(pos); err != nil { // pretend a prompt of pos tokens
						t.Fatal(err)
					}
				}
			}
			if i == 2 && ledger {
				g.ResetLedger()
			}
			s := time.Now()
			if _, err := m.ForwardBatch(seqs); err != nil {
				t.Fatalf("S=%d: %v", S, err)
			}
			if i >= 2 {
				ts = append(ts, time.Since(s).Seconds())
			}
		}
		slices.Sort(ts)
		med := ts[len(ts)/2]
		res = append(res, fmt.Sprintf("S=%d×%d %.3f ms/step %.0f t/s", S, rows, 1e3*med, float64(S)/med))
		if ledger {
			var l strings.Builder
			g.WriteLedger(&l)
			t.Logf("ledger of %d steps of S=%d×%d:\n%s", steps, S, rows, l.String())
		}
	}
	t.Logf("RESULT batch %s: %s", path, strings.Join(res, " · "))
}
