package process

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/minfer/minfer/sdk"
)

var (
	buildOnce sync.Once
	buildErr  error
	buildDir  string
)

// testBinary builds the programs under testdata once per test binary and returns the
// path of the one named name (testplugin, v2plugin).
func testBinary(t testing.TB, name string) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "minfer-process-test")
		if buildErr != nil {
			return
		}
		out, err := exec.Command("go", "build", "-o", buildDir+"/", "./testdata/testplugin", "./testdata/v2plugin").CombinedOutput()
		if err != nil {
			buildErr = errors.New(string(out))
		}
	})
	if buildErr != nil {
		t.Fatalf("building the test plugins: %v", buildErr)
	}
	return filepath.Join(buildDir, name)
}

func testPlugin(t testing.TB) string { return testBinary(t, "testplugin") }

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// open starts the test plugin with params and closes it at the end of the test.
func open(t *testing.T, params string, opts Options) *Client {
	t.Helper()
	opts.Params = []byte(params)
	c, err := Open(context.Background(), "test", testPlugin(t), opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestAllRoles(t *testing.T) {
	c := open(t, `{"top_k": 8, "window": 32, "factor": 4}`, Options{})
	if got, want := c.Roles(), []sdk.Role{sdk.RolePolicy, sdk.RoleSampler, sdk.RolePenalty, sdk.RoleDrafter}; !slices.Equal(got, want) {
		t.Fatalf("Roles: got %v, want %v", got, want)
	}
	if info := c.Info(); info.Name != "testplugin" || info.Version != "0.1.0" {
		t.Fatalf("Info: got %+v", info)
	}
	ctx := context.Background()

	t.Run("policy", func(t *testing.T) {
		p, err := c.Policy()
		if err != nil {
			t.Fatal(err)
		}
		q, err := c.Policy()
		if err != nil {
			t.Fatal(err)
		}
		last := sdk.RoundOutcome{Round: 3, Depth: 4, Drafted: 4, Accepted: 2, DraftConf: []float32{0.9, 0.8, 0.5, 0.1}, MaxDepth: 16}
		for i, want := range []int{3, 4} { // accepted + calls of this instance
			got, err := p.NextDepth(ctx, last)
			if err != nil {
				t.Fatal(err)
			}
			if got.Depth != want || got.MinConf != 0.25 {
				t.Fatalf("call %d: got %+v, want depth %d min_conf 0.25", i, got, want)
			}
		}
		// Another instance has its own state.
		if got, err := q.NextDepth(ctx, last); err != nil || got.Depth != 3 {
			t.Fatalf("second instance: got %+v, %v; want depth 3", got, err)
		}
		// And may have its own params, in the same process.
		bad, err := c.PolicyWith([]byte(`{"mode": "fail"}`))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := bad.NextDepth(ctx, last); err == nil || !strings.Contains(err.Error(), "failing on purpose") {
			t.Fatalf("instance with its own params: got %v, want its failure", err)
		}
		if got, err := p.NextDepth(ctx, last); err != nil || got.Depth != 5 {
			t.Fatalf("first instance after another failed: got %+v, %v; want depth 5", got, err)
		}
	})

	t.Run("sampler", func(t *testing.T) {
		s, err := c.Sampler()
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Needs().TopK; got != 8 {
			t.Fatalf("Needs().TopK: got %d, want 8", got)
		}
		r := &sdk.SampleRound{
			Draft: []int32{5, 7, 9},
			Rows: []sdk.SampleRow{
				{IDs: []int32{5, 1}, Logits: []float32{3, 1}},
				{IDs: []int32{7, 2}, Logits: []float32{2, 1}},
				{IDs: []int32{4, 9}, Logits: []float32{float32(negInf()), -1}},
				{IDs: []int32{0}, Logits: []float32{0}},
			},
			Seed: 42, Step: 10,
		}
		got, err := s.Sample(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if want := (sdk.SampleResult{Accepted: 2, Next: 4}); got != want {
			t.Fatalf("got %+v, want %+v", got, want)
		}
	})

	t.Run("penalty", func(t *testing.T) {
		p, err := c.Penalty()
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Window(); got != 32 {
			t.Fatalf("Window: got %d, want 32", got)
		}
		rows := []sdk.PenaltyRow{
			{History: []int32{1, 2, 1}, IDs: []int32{1, 2}, Logits: []float32{8, -4}},
			{History: []int32{1, 2, 1, 3}, IDs: []int32{1, 2, 3}, Logits: []float32{8, -4, 1}},
		}
		if err := p.Apply(ctx, rows); err != nil {
			t.Fatal(err)
		}
		want := [][]float32{{2, -1}, {2, -1, 0.25}}
		for i := range rows {
			if !slices.Equal(rows[i].Logits, want[i]) {
				t.Fatalf("row %d: got %v, want %v", i, rows[i].Logits, want[i])
			}
		}
		if err := p.(interface{ Close() error }).Close(); err != nil {
			t.Fatalf("instance Close: %v", err)
		}
	})

	t.Run("drafter", func(t *testing.T) {
		d, err := c.Drafter()
		if err != nil {
			t.Fatal(err)
		}
		defer d.(interface{ Close() error }).Close()
		q := &sdk.DraftRequest{Appended: []int32{4, 8}, MaxDepth: 2, Vocab: 10}
		got, err := d.Draft(ctx, q)
		if err != nil || !slices.Equal(got.Tokens, []int32{8, 8}) || !slices.Equal(got.Conf, []float32{0.5, 0.5}) {
			t.Fatalf("got %+v %v, want [8 8] at 0.5", got, err)
		}
		// the plugin keeps the sequence: nothing appended, the same last token
		q = &sdk.DraftRequest{MaxDepth: 5, Vocab: 10}
		if got, err := d.Draft(ctx, q); err != nil || !slices.Equal(got.Tokens, []int32{8, 8, 8}) {
			t.Fatalf("second call: got %+v %v, want [8 8 8]", got, err)
		}
		bad, err := c.DrafterWith([]byte(`{"mode": "garbage"}`))
		if err != nil {
			t.Fatal(err)
		}
		_, err = bad.Draft(ctx, &sdk.DraftRequest{Appended: []int32{1}, MaxDepth: 2, Vocab: 10})
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "outside the vocabulary") || !strings.Contains(err.Error(), "drafter") {
			t.Fatalf("garbage drafter: got %v, want a malformed error naming the role", err)
		}
		// the failed instance says so (the engine turns the drafter off at once), a
		// good one does not
		if e := bad.(interface{ Err() error }).Err(); e == nil || e.Error() != err.Error() {
			t.Fatalf("garbage drafter's Err after the failure: %v, want %v", e, err)
		}
		if e := d.(interface{ Err() error }).Err(); e != nil {
			t.Fatalf("good drafter's Err: %v, want nil", e)
		}
	})
}

func negInf() float64 { return -1 / zero }

var zero = 0.0

// TestHostileCalls: each misbehaviour gives a clear error naming plugin, role and
// method; the instance stays failed and the host keeps working.
func TestHostileCalls(t *testing.T) {
	round := &sdk.SampleRound{Draft: []int32{1}, Rows: []sdk.SampleRow{{IDs: []int32{1}}, {IDs: []int32{2}}}}
	rows := []sdk.PenaltyRow{{History: []int32{1}, IDs: []int32{1}, Logits: []float32{1}}}
	calls := map[sdk.Role]func(c *Client) error{
		sdk.RolePolicy: func(c *Client) error {
			p, err := c.Policy()
			if err != nil {
				return err
			}
			_, err = p.NextDepth(context.Background(), sdk.RoundOutcome{Round: -1})
			if err != nil {
				// The failure sticks.
				if _, again := p.NextDepth(context.Background(), sdk.RoundOutcome{}); again == nil || again.Error() != err.Error() {
					t.Errorf("second call after a failure: got %v, want %v", again, err)
				}
			}
			return err
		},
		sdk.RoleSampler: func(c *Client) error {
			s, err := c.Sampler()
			if err != nil {
				return err
			}
			_, err = s.Sample(context.Background(), round)
			return err
		},
		sdk.RolePenalty: func(c *Client) error {
			p, err := c.Penalty()
			if err != nil {
				return err
			}
			return p.Apply(context.Background(), rows)
		},
	}
	method := map[sdk.Role]string{sdk.RolePolicy: "NextDepth", sdk.RoleSampler: "Sample", sdk.RolePenalty: "Apply"}
	for _, tc := range []struct {
		mode  string
		is    error
		parts []string
	}{
		{"crash", ErrExited, []string{"plugin process exited"}},
		{"hang", context.DeadlineExceeded, []string{"no answer before the deadline"}},
		{"panic", nil, []string{"panicked", "panic on purpose"}},
		{"fail", nil, []string{"testplugin: failing on purpose"}},
		{"garbage", ErrMalformed, []string{"malformed result"}},
	} {
		for _, role := range []sdk.Role{sdk.RolePolicy, sdk.RoleSampler, sdk.RolePenalty} {
			t.Run(tc.mode+"/"+string(role), func(t *testing.T) {
				// Only the hung plugin must meet the deadline, so only it gets a short one:
				// the others answer at once, and 200 ms could pass before a gRPC round trip
				// on a loaded 2-core machine, turning their error into a timeout.
				timeout := 30 * time.Second
				if tc.mode == "hang" {
					timeout = 200 * time.Millisecond
				}
				c := open(t, `{"mode": "`+tc.mode+`"}`, Options{Timeout: timeout})
				err := calls[role](c)
				if err == nil {
					t.Fatal("got no error")
				}
				t.Logf("error: %v", err)
				var pe *Error
				if !errors.As(err, &pe) || pe.Plugin != "test" || pe.Role != role || pe.Method != method[role] {
					t.Fatalf("got %#v, want an *Error for plugin test, role %s, method %s", err, role, method[role])
				}
				if tc.is != nil && !errors.Is(err, tc.is) {
					t.Errorf("error %q: errors.Is(%v) = false", err, tc.is)
				}
				want := `process plugin "test": ` + string(role) + ": " + method[role] + ": "
				if !strings.HasPrefix(err.Error(), want) {
					t.Errorf("error %q does not start with %q", err, want)
				}
				for _, p := range tc.parts {
					if !strings.Contains(err.Error(), p) {
						t.Errorf("error %q lacks %q", err, p)
					}
				}
				// The host keeps working: a healthy plugin answers.
				ok := open(t, `{}`, Options{})
				if err := calls[role](ok); err != nil {
					t.Fatalf("healthy plugin after a %s: %v", tc.mode, err)
				}
				// A hung child is killed by Close.
				if err := c.Close(); err != nil {
					t.Fatal(err)
				}
				waitGone(t, c.PID())
			})
		}
	}
}

func TestCallerDeadlineWins(t *testing.T) {
	c := open(t, `{"mode": "hang"}`, Options{Timeout: time.Hour})
	p, err := c.Policy()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := p.NextDepth(ctx, sdk.RoundOutcome{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want a deadline error", err)
	}
	// Other instances of the same (hung) process still answer New and Close works.
	if _, err := c.Sampler(); err != nil {
		t.Fatalf("Sampler after a hung policy call: %v", err)
	}
}

func TestCloseKillsChild(t *testing.T) {
	c := open(t, `{}`, Options{})
	pid := c.PID()
	if pid <= 0 {
		t.Fatalf("PID: got %d", pid)
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("plugin process %d not running before Close: %v", pid, err)
	}
	p, err := c.Policy()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid)
	if _, err := p.NextDepth(context.Background(), sdk.RoundOutcome{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("call after Close: got %v, want ErrClosed", err)
	}
	if _, err := c.Sampler(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Sampler after Close: got %v, want ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// waitGone fails unless process pid has exited (and been reaped) soon.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	for range 500 {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("plugin process %d still exists after Close", pid)
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	notExec := filepath.Join(dir, "plugin.txt")
	if err := os.WriteFile(notExec, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	notPlugin := filepath.Join(dir, "true.sh")
	if err := os.WriteFile(notPlugin, []byte("#!/bin/sh\necho not a plugin\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		opts       Options
		want       string
	}{
		{"missing", filepath.Join(dir, "nope"), Options{}, "no such file"},
		{"directory", dir, Options{}, "not a regular file"},
		{"not executable", notExec, Options{}, "not executable"},
		{"not a plugin", notPlugin, Options{StartTimeout: 5 * time.Second}, `process plugin "x": start:`},
		{"checksum", testPlugin(t), Options{SHA256: make([]byte, 32)}, "checksum"},
		{"protocol version", testBinary(t, "v2plugin"), Options{}, "incompatible API version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Open(context.Background(), "x", tc.path, tc.opts)
			if err == nil {
				c.Close()
				t.Fatal("got no error")
			}
			t.Logf("error: %v", err)
			if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), `process plugin "x": start: `) {
				t.Fatalf("got %q, want it to contain %q", err, tc.want)
			}
		})
	}
	t.Run("bad params", func(t *testing.T) {
		c := open(t, `{"mode": "badparams"}`, Options{})
		_, err := c.Policy()
		if err == nil || !strings.Contains(err.Error(), `process plugin "test": policy: New: params: mode badparams refused`) {
			t.Fatalf("got %v", err)
		}
	})
}

func TestPluginOutputIsLogged(t *testing.T) {
	log := &syncWriter{w: &strings.Builder{}}
	c := open(t, `{}`, Options{Log: log})
	p, err := c.Policy()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.NextDepth(context.Background(), sdk.RoundOutcome{Round: 7}); err != nil {
		t.Fatal(err)
	}
	// The plugin's stderr streams to the host asynchronously: wait for the line.
	const want = "plugin test: testplugin: NextDepth after round 7\n"
	for i := 0; i < 500 && !strings.Contains(log.String(), want); i++ {
		time.Sleep(10 * time.Millisecond)
	}
	c.Close()
	if !strings.Contains(log.String(), want) {
		t.Fatalf("log lacks the plugin's stderr line:\n%s", log.String())
	}
}

type syncWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.String()
}
