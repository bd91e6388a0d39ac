package kv

import (
	"errors"
	"testing"
)

type holder struct {
	p      *Pool
	blocks int
	freed  bool
}

func (h *holder) ReleaseLocked() { h.p.GiveLocked(h.blocks); h.blocks, h.freed = 0, true }

// TestPool: blocks are counted as they are taken and given back; a Take that finds too
// few free takes idle holders' blocks back, oldest first and no more of them than it
// needs; a busy holder is never touched; what cannot be served now is ErrPoolFull, and
// what could never be is ErrFull.
func TestPool(t *testing.T) {
	p, err := NewPool(0, 10, 100)
	if err != nil {
		t.Fatal(err)
	}
	if p.Block() != DefaultBlock || p.BlocksFor(DefaultBlock+1) != 2 || p.Bytes() != 1000 {
		t.Fatalf("block %d, BlocksFor %d, bytes %d", p.Block(), p.BlocksFor(DefaultBlock+1), p.Bytes())
	}
	a, b, c := &holder{p: p, blocks: 4}, &holder{p: p, blocks: 3}, &holder{p: p, blocks: 3}
	for _, h := range []*holder{a, b, c} {
		if err := p.Take(h.blocks); err != nil {
			t.Fatal(err)
		}
	}
	if p.Used() != 10 || p.UsedBytes() != 1000 {
		t.Fatalf("used %d (%d bytes), want 10", p.Used(), p.UsedBytes())
	}
	if err := p.Take(1); !errors.Is(err, ErrPoolFull) {
		t.Fatalf("full pool, nothing idle: got %v, want ErrPoolFull", err)
	}
	p.Idle(a)
	p.Idle(b)
	if err := p.Take(2); err != nil {
		t.Fatal(err)
	}
	if !a.freed || b.freed || p.Used() != 8 {
		t.Fatalf("after taking 2 with a and b idle: a freed %v, b freed %v, used %d; want a only (oldest), 8 used", a.freed, b.freed, p.Used())
	}
	if p.Busy(a) || !p.Busy(b) {
		t.Fatal("Busy: a was taken back (false), b was still idle (true)")
	}
	if err := p.Take(3); !errors.Is(err, ErrPoolFull) || b.freed {
		t.Fatalf("busy b: got %v, b freed %v; want ErrPoolFull and b kept", err, b.freed)
	}
	if err := p.Take(11); !errors.Is(err, ErrFull) || errors.Is(err, ErrPoolFull) {
		t.Fatalf("more than the pool: got %v, want ErrFull", err)
	}
	p.Give(8)
	if p.Used() != 0 {
		t.Fatalf("used %d after giving everything back", p.Used())
	}
	if _, err := NewPool(16, 0, 1); err == nil {
		t.Fatal("a pool of no blocks: got no error")
	}
}
