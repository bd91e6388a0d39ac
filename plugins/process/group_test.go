package process

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// wrapper writes a shell script that starts `sleep 1000` in the background, records
// its pid, then runs then (a command line; "" waits for the sleep: a plugin that never
// handshakes). It returns the script and the pid file.
func wrapper(t *testing.T, then string) (script, pidFile string) {
	t.Helper()
	dir := t.TempDir()
	pidFile = filepath.Join(dir, "child.pid")
	if then == "" {
		then = "wait"
	}
	script = filepath.Join(dir, "plugin.sh")
	body := "#!/bin/sh\nsleep 1000 &\necho $! > " + pidFile + "\n" + then + "\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return script, pidFile
}

func readPID(t *testing.T, pidFile string) int {
	t.Helper()
	for range 500 {
		b, err := os.ReadFile(pidFile)
		if s := strings.TrimSpace(string(b)); err == nil && s != "" {
			pid, err := strconv.Atoi(s)
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the script never wrote %s", pidFile)
	return 0
}

// openGuarded runs Open and fails the test if it has not returned after a minute (a
// hang).
func openGuarded(t *testing.T, ctx context.Context, path string, opts Options) (*Client, error) {
	t.Helper()
	type res struct {
		c   *Client
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := Open(ctx, "wrapped", path, opts)
		ch <- res{c, err}
	}()
	select {
	case r := <-ch:
		return r.c, r.err
	case <-time.After(time.Minute):
		t.Fatal("Open still blocked a minute after its start timeout")
	}
	return nil, nil
}

// TestStartTimeoutKillsTheGroup: a script whose child never handshakes fails Open at
// the start timeout, and the child it started is killed (before: Open blocked for
// ever after the timeout, waiting for the pipes the child held, and the child
// outlived minfer with PPID 1).
func TestStartTimeoutKillsTheGroup(t *testing.T) {
	script, pidFile := wrapper(t, "")
	_, err := openGuarded(t, context.Background(), script, Options{StartTimeout: 300 * time.Millisecond})
	if err == nil || !strings.HasPrefix(err.Error(), `process plugin "wrapped": start: `) {
		t.Fatalf("got %v, want a start error", err)
	}
	waitGone(t, readPID(t, pidFile))
}

// TestOpenStopsWithItsContext: a host told to stop does not wait out the start
// timeout of a plugin that never handshakes.
func TestOpenStopsWithItsContext(t *testing.T) {
	script, pidFile := wrapper(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	go func() { readPID(t, pidFile); cancel() }()
	_, err := openGuarded(t, ctx, script, Options{StartTimeout: time.Hour})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	waitGone(t, readPID(t, pidFile))
}

// TestCloseKillsTheGroup: what a plugin started (here the wrapper's background
// child) dies when the plugin is closed.
func TestCloseKillsTheGroup(t *testing.T) {
	script, pidFile := wrapper(t, "exec "+testPlugin(t))
	c, err := openGuarded(t, context.Background(), script, Options{})
	if err != nil {
		t.Fatal(err)
	}
	pid := readPID(t, pidFile)
	if _, err := c.Policy(); err != nil {
		t.Fatal(err)
	}
	c.Close()
	waitGone(t, pid)
}

// TestLongOutputLinesCut: a plugin's output line is echoed up to maxLogLine bytes
// (before: a megabyte line went to the log whole).
func TestLongOutputLinesCut(t *testing.T) {
	var b strings.Builder
	w := &lineWriter{w: &b, prefix: "plugin x: "}
	w.Write([]byte(strings.Repeat("a", 100_000)))
	w.Write([]byte(strings.Repeat("b", 100_000) + "\nshort\n"))
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 2 || lines[1] != "plugin x: short" {
		t.Fatalf("got %d lines, the last %.80q", len(lines), lines[len(lines)-1])
	}
	if want := "plugin x: " + strings.Repeat("a", maxLogLine) + " … (line cut)"; lines[0] != want {
		t.Fatalf("first line: got %d bytes %.80q…, want %d", len(lines[0]), lines[0], len(want))
	}
}

// TestOpenWithADoneContext: Open under a context already done returns at once with the
// context's error and leaves no process behind, even though the stop lands before the
// plugin's process has started (before: the stop found no process to kill and Open
// waited out the start timeout, an hour here; under load the same race hung
// TestOpenStopsWithItsContext).
func TestOpenWithADoneContext(t *testing.T) {
	script, pidFile := wrapper(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := openGuarded(t, ctx, script, Options{StartTimeout: time.Hour})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if b, err := os.ReadFile(pidFile); err == nil && strings.TrimSpace(string(b)) != "" {
		waitGone(t, readPID(t, pidFile))
	}
}
