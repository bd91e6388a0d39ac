package engine

import (
	"sync"

	"github.com/minfer/minfer/core/backend"
)

// A Backend runs one forward at a time (its contract), while a server runs several
// Sessions — and a target and its draft share one backend. backendLock serialises the
// forwards per backend; sessions still interleave at forward granularity.
var backendLocks sync.Map // backend.Backend → *sync.Mutex

func backendLock(b backend.Backend) *sync.Mutex {
	if mu, ok := backendLocks.Load(b); ok {
		return mu.(*sync.Mutex)
	}
	mu, _ := backendLocks.LoadOrStore(b, new(sync.Mutex))
	return mu.(*sync.Mutex)
}
