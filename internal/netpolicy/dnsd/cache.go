package dnsd

import (
	"net/netip"
	"slices"
	"sync"
	"time"
)

// cache remembers, per sandbox, which names this server resolved to which
// addresses, until the answer's (floored) TTL runs out. Each sandbox holds
// at most max (address, name) pairs. When full, expired pairs go first,
// else an arbitrary eighth: an evicted pair only means the proxy denies a
// connection to that address under that name until the sandbox resolves
// the name again.
type cache struct {
	mu        sync.Mutex
	max       int
	sandboxes map[string]*sandboxCache
}

type sandboxCache struct {
	byAddr map[netip.Addr]map[string]time.Time // addr -> name -> expiry
	n      int                                 // pairs
}

func newCache(max int) *cache {
	return &cache{max: max, sandboxes: map[string]*sandboxCache{}}
}

func (c *cache) add(sandboxID, name string, addrs []netip.Addr, expires time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sc := c.sandboxes[sandboxID]
	if sc == nil {
		sc = &sandboxCache{byAddr: map[netip.Addr]map[string]time.Time{}}
		c.sandboxes[sandboxID] = sc
	}
	now := time.Now()
	for _, a := range addrs {
		a = a.Unmap()
		old, ok := sc.byAddr[a][name]
		if ok {
			if expires.After(old) {
				sc.byAddr[a][name] = expires
			}
			continue
		}
		if sc.n >= c.max {
			sc.evict(now, max(c.max/8, 1))
		}
		if sc.byAddr[a] == nil {
			sc.byAddr[a] = map[string]time.Time{}
		}
		sc.byAddr[a][name] = expires
		sc.n++
	}
}

// evict drops every expired pair, or, when none has expired, want
// arbitrary ones.
func (sc *sandboxCache) evict(now time.Time, want int) {
	before := sc.n
	sc.drop(func(exp time.Time) bool { return !exp.After(now) })
	if sc.n < before {
		return
	}
	sc.drop(func(time.Time) bool {
		want--
		return want >= 0
	})
}

func (sc *sandboxCache) drop(match func(time.Time) bool) {
	for a, names := range sc.byAddr {
		for name, exp := range names {
			if match(exp) {
				delete(names, name)
				sc.n--
			}
		}
		if len(names) == 0 {
			delete(sc.byAddr, a)
		}
	}
}

// names returns the unexpired names for addr, sorted.
func (c *cache) names(sandboxID string, addr netip.Addr, now time.Time) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	sc := c.sandboxes[sandboxID]
	if sc == nil {
		return nil
	}
	var out []string
	for name, exp := range sc.byAddr[addr] {
		if exp.After(now) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func (c *cache) forget(sandboxID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.sandboxes, sandboxID)
}
