package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/minfer/minfer/core/engine/bench"
)

func TestBenchJSON(t *testing.T) {
	out, stderr, err := runCLI(t, "", "bench", "--config", emptyConfig(t), "-p", "16", "-n", "4", "-r", "2", "-t", "1", "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var got []bench.Result
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v in %q", err, out)
	}
	if len(got) != 2 || got[0].Test != "pp16" || got[1].Test != "tg4" || got[0].NPrompt != 16 || got[1].NGen != 4 {
		t.Fatalf("got %+v, want pp16 and tg4", got)
	}
	for _, r := range got {
		if len(r.SamplesTS) != 2 || !(r.AvgTS > 0) || r.Threads != 1 || r.Model != embeddedName {
			t.Fatalf("%s: got %+v", r.Test, r)
		}
	}
}

// TestBenchDepth: -d runs each test at each depth (llama-bench's --n-depth), its lines
// named and numbered as llama-bench's; a negative depth is a usage error.
func TestBenchDepth(t *testing.T) {
	out, stderr, err := runCLI(t, "", "bench", "--config", emptyConfig(t), "-p", "8", "-n", "0", "-d", "0,32", "-r", "1", "-t", "1", "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var got []bench.Result
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v in %q", err, out)
	}
	if len(got) != 2 || got[0].Test != "pp8" || got[0].NDepth != 0 || got[1].Test != "pp8 @ d32" || got[1].NDepth != 32 || !(got[1].AvgTS > 0) {
		t.Fatalf("got %+v, want pp8 and pp8 @ d32", got)
	}
	if _, _, err := runCLI(t, "", "bench", "--config", emptyConfig(t), "-n", "2", "--n-depth", "-1"); exitCode(err) != 2 || !strings.Contains(err.Error(), "-d -1") {
		t.Fatalf("--n-depth -1: got %v (exit %d), want a usage error naming it", err, exitCode(err))
	}
}

func TestBenchTable(t *testing.T) {
	out, _, err := runCLI(t, "", "bench", "--config", emptyConfig(t), "-p", "0", "-n", "2", "-r", "1", "-t", "1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "| tg2 ") && !strings.Contains(out, "tg2 |") {
		t.Fatalf("table: got %q, want a tg2 line", out)
	}
	if strings.Contains(out, "pp0") {
		t.Fatalf("table: -p 0 should skip pp, got %q", out)
	}
	if _, _, err := runCLI(t, "", "bench", "-p", "0", "-n", "0"); exitCode(err) != 2 {
		t.Fatalf("-p 0 -n 0: got %v, want a usage error", err)
	}
	// --cpu-order takes the orders [model] cpu_order takes, and names a bad one
	if _, stderr, err := runCLI(t, "", "bench", "--config", emptyConfig(t), "--device", "cpu", "--cpu-order", "avx2", "-p", "0", "-n", "2", "-r", "1", "-t", "1"); err != nil {
		t.Fatalf("--cpu-order avx2: %v\n%s", err, stderr)
	}
	if _, _, err := runCLI(t, "", "bench", "--config", emptyConfig(t), "--cpu-order", "avx3", "-n", "2"); exitCode(err) != 2 || !strings.Contains(err.Error(), `--cpu-order "avx3"`) {
		t.Fatalf("--cpu-order avx3: got %v (exit %d), want a usage error naming it", err, exitCode(err))
	}
}
