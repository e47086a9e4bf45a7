package records

import "time"

// SetObserver installs fn, called with the name and latency of each of
// the store's operations (put_sandbox, get_sandbox, append_event, ...):
// the daemon's store-latency histogram. Call it before the store is used.
func (s *Store) SetObserver(fn func(op string, d time.Duration)) { s.observe = fn }

// timed starts timing op; the returned func reports it (a defer).
func (s *Store) timed(op string) func() {
	if s.observe == nil {
		return func() {}
	}
	t0 := time.Now()
	return func() { s.observe(op, time.Since(t0)) }
}
