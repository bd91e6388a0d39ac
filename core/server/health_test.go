package server

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/minfer/minfer/core/backend/cpu"
)

// TestHealthReadiness: /health is 200 while a request would be taken, 503 "busy" while
// no slot is idle and the queue is full, 503 "draining" once shutdown begins;
// /health/live is 200 throughout.
func TestHealthReadiness(t *testing.T) {
	srv, hs := serveStories(t, cpu.New(cpu.Options{Threads: 1}), Options{ModelID: "m", Parallel: 1, QueueSize: 1, Resolver: testResolver{}})
	get := func(path string) (int, string) {
		resp, err := http.Get(hs.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct{ Status string }
		json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body.Status
	}
	check := func(when string, code int, status string) {
		t.Helper()
		if c, s := get("/health"); c != code || s != status {
			t.Errorf("%s: /health %d %q, want %d %q", when, c, s, code, status)
		}
		if c, s := get("/health/live"); c != http.StatusOK || s != "live" {
			t.Errorf("%s: /health/live %d %q, want 200 live", when, c, s)
		}
	}
	check("idle", http.StatusOK, "ok")
	sl := <-srv.slots // the one slot taken
	check("slot taken, queue empty", http.StatusOK, "ok")
	srv.waiting <- struct{}{} // and the one queue place
	check("slot taken, queue full", http.StatusServiceUnavailable, "busy")
	<-srv.waiting
	srv.release(sl)
	check("free again", http.StatusOK, "ok")
	srv.draining.Store(true)
	check("draining", http.StatusServiceUnavailable, "draining")
}
