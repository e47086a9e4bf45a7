package sandboxlog

import (
	"cmp"
	"slices"
)

// counter is one key's count; over says by how much it may be counted
// over (what the key it replaced had).
type counter struct {
	key     string
	n, over int
}

// topK counts keys in bounded memory with the space-saving algorithm: up
// to size keys are counted exactly; a new key past that takes the place of
// the least counted one and starts from its count (an overestimate by at
// most that much). A key whose true count exceeds total/size is never
// pushed out, so the heaviest keys of a flood stay named whatever stream
// of one-off keys comes with them.
type topK struct {
	size  int
	items []counter
	index map[string]int
}

func (t *topK) add(key string) {
	if t.index == nil {
		t.index = map[string]int{}
	}
	if i, ok := t.index[key]; ok {
		t.items[i].n++
		return
	}
	if len(t.items) < t.size {
		t.index[key] = len(t.items)
		t.items = append(t.items, counter{key: key, n: 1})
		return
	}
	least := 0
	for i, c := range t.items {
		if c.n < t.items[least].n {
			least = i
		}
	}
	old := t.items[least]
	delete(t.index, old.key)
	t.items[least] = counter{key: key, n: old.n + 1, over: old.n}
	t.index[key] = least
}

// top returns the n most counted keys, most first (ties by key).
func (t *topK) top(n int) []counter {
	out := slices.Clone(t.items)
	slices.SortFunc(out, func(a, b counter) int {
		if c := cmp.Compare(b.n, a.n); c != 0 {
			return c
		}
		return cmp.Compare(a.key, b.key)
	})
	if len(out) > n {
		out = out[:n]
	}
	return out
}
