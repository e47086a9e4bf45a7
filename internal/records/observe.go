package records

import "time"

// observer gets the latency of each of the store's operations.
type observer = func(op string, d time.Duration)

// SetObserver installs fn, called with the name and latency of each of
// the store's operations (put_sandbox, get_sandbox, append_event, ...):
// the daemon's store-latency histogram.
func (s *Store) SetObserver(fn func(op string, d time.Duration)) { s.observe.Store(&fn) }

// timed starts timing op; the returned func reports it (a defer).
func (s *Store) timed(op string) func() {
	fn := s.observe.Load()
	if fn == nil {
		return func() {}
	}
	t0 := time.Now()
	return func() { (*fn)(op, time.Since(t0)) }
}
