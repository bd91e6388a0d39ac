package server

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// connLimiter caps the open connections of an http.Server. A connection counts from
// Accept to its close. When a new connection would pass the cap, the connection that
// has gone longest without a request in progress (a client still sending its headers
// — slowloris — or its body, or an idle keep-alive) is closed to make room; when every
// connection is running a request, the new one is refused (closed at once). So a flood
// of half-open connections neither reaches the process's file limit nor locks out
// /health: each new client displaces the oldest of them.
//
// Wire it as the server's listener (limitListener), ConnState (state) and ConnContext
// (withConn), and wrap the handler with busy.
type connLimiter struct {
	max   int
	mu    sync.Mutex
	conns map[net.Conn]*connInfo
}

type connInfo struct {
	since  time.Time // accepted, or last request finished
	busy   int       // requests in a handler now
	served int       // requests finished
}

type connKey struct{}

func newConnLimiter(max int) *connLimiter {
	return &connLimiter{max: max, conns: map[net.Conn]*connInfo{}}
}

// admit registers c, making room first; false means c was refused.
func (l *connLimiter) admit(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.conns) >= l.max {
		// The oldest connection that never finished a request (half-open: the flood)
		// goes first; an idle keep-alive only when there is none, since its client
		// may be about to reuse it.
		var victim net.Conn
		var oldest time.Time
		fresh := false
		for vc, info := range l.conns {
			if info.busy != 0 {
				continue
			}
			f := info.served == 0
			if victim == nil || (f && !fresh) || (f == fresh && info.since.Before(oldest)) {
				victim, oldest, fresh = vc, info.since, f
			}
		}
		if victim == nil {
			return false
		}
		delete(l.conns, victim)
		victim.Close()
	}
	l.conns[c] = &connInfo{since: time.Now()}
	return true
}

// state is the http.Server's ConnState hook: a closed or hijacked connection leaves.
func (l *connLimiter) state(c net.Conn, s http.ConnState) {
	if s == http.StateClosed || s == http.StateHijacked {
		l.mu.Lock()
		delete(l.conns, c)
		l.mu.Unlock()
	}
}

// withConn is the http.Server's ConnContext hook: requests know their connection.
func (l *connLimiter) withConn(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// busy marks the request's connection as running a request while h serves it, from
// the moment its body has been read whole: a client that trickles its body (like one
// that trickles its headers) stays displaceable, so slow uploads cannot hold every
// connection either.
func (l *connLimiter) busy(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := r.Context().Value(connKey{}).(net.Conn)
		b := &bodyWatch{ReadCloser: r.Body, done: func() { l.mark(c, 1) }}
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			b.fire()
		} else {
			r.Body = b
		}
		defer func() {
			if b.fired {
				l.mark(c, -1)
			}
		}()
		h.ServeHTTP(w, r)
	})
}

// bodyWatch calls done once, when its body reaches EOF.
type bodyWatch struct {
	io.ReadCloser
	done  func()
	fired bool
}

func (b *bodyWatch) fire() {
	if !b.fired {
		b.fired = true
		b.done()
	}
}

func (b *bodyWatch) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.fire()
	}
	return n, err
}

func (l *connLimiter) mark(c net.Conn, d int) {
	if c == nil {
		return
	}
	l.mu.Lock()
	if info, ok := l.conns[c]; ok {
		info.busy += d
		info.since = time.Now()
		if d < 0 {
			info.served++
		}
	}
	l.mu.Unlock()
}

// open is the number of connections counted now.
func (l *connLimiter) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

// limitListener admits each accepted connection through l.
type limitListener struct {
	net.Listener
	l *connLimiter
}

func (ln limitListener) Accept() (net.Conn, error) {
	for {
		c, err := ln.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if ln.l.admit(c) {
			return c, nil
		}
		c.Close()
	}
}
