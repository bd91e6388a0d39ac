package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/minfer/minfer/internal/loadgen"
)

// TestLoadgenAgainstServe: minfer loadgen against minfer serve (the embedded model),
// plain and streamed: every request answered, the tokens counted, TTFT measured when
// streaming; against nothing, every request fails and the exit status says so.
func TestLoadgenAgainstServe(t *testing.T) {
	url, stop := startServe(t, "--parallel", "2")
	defer stop()
	for _, stream := range []bool{false, true} {
		args := []string{"loadgen", "--url", url, "-c", "2", "--requests", "2", "-n", "8", "--json"}
		if stream {
			args = append(args, "--stream")
		}
		out, stderr, err := runCLI(t, "", args...)
		if err != nil {
			t.Fatalf("stream %v: %v\n%s", stream, err, stderr)
		}
		var res loadgen.Result
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("%v: %q", err, out)
		}
		if res.Requests != 4 || res.Errors != 0 || res.CompletionTokens < 4 || res.CompletionTokens > 32 || res.TokPerS <= 0 {
			t.Errorf("stream %v: %+v", stream, res)
		}
		if stream != (res.TTFTS != nil) {
			t.Errorf("stream %v: ttft %+v", stream, res.TTFTS)
		}
	}
	// The slots' forwards were batched, and the server's metrics say so.
	m := metricsText(t, url)
	for _, want := range []string{`minfer_batch_sequences_count{model="target"}`, `minfer_batch_rows_count{model="target"}`, "minfer_time_per_output_token_seconds_count 8"} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q:\n%s", want, grepLines(m, "batch", "per_output"))
		}
	}
	// Every forward counted in the batch sizes has its time recorded.
	if n := metricValue(m, `minfer_batch_sequences_count{model="target"}`); n < 1 || metricValue(m, `minfer_forward_seconds_count{model="target"}`) != n || metricValue(m, `minfer_forward_seconds_sum{model="target"}`) <= 0 {
		t.Errorf("forward times do not cover the forwards:\n%s", grepLines(m, "batch_sequences_count", "forward_seconds_"))
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	out, _, err := runCLI(t, "", "loadgen", "--url", url, "-c", "1", "--requests", "1", "-n", "1", "--timeout", "5s")
	if exitCode(err) != 1 || !strings.Contains(err.Error(), "every request failed") {
		t.Errorf("no server: err %v (exit %d), want exit 1 saying every request failed\n%s", err, exitCode(err), out)
	}
	if _, _, err := runCLI(t, "", "loadgen", "--extra", "[1]"); exitCode(err) != 2 {
		t.Errorf("--extra [1]: err %v, want a usage error", err)
	}
}
