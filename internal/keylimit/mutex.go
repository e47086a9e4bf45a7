package keylimit

import "sync"

// Mutex is a lock per key: Lock(k) waits while another holder has k. Keys
// nobody holds or waits for take no memory. The zero value is ready.
type Mutex struct {
	mu    sync.Mutex
	locks map[string]*keyLock
}

type keyLock struct {
	mu   sync.Mutex
	refs int // holders and waiters
}

// Lock takes key's lock and returns the func that releases it.
func (m *Mutex) Lock(key string) (unlock func()) {
	m.mu.Lock()
	if m.locks == nil {
		m.locks = map[string]*keyLock{}
	}
	l := m.locks[key]
	if l == nil {
		l = &keyLock{}
		m.locks[key] = l
	}
	l.refs++
	m.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		m.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(m.locks, key)
		}
		m.mu.Unlock()
	}
}
