package broker

import (
	"slices"
	"sort"
	"sync"
)

// streamRegistry holds the values served under names (a server's streams), in an
// order of their own. It is safe for concurrent use. Lists it returns are
// the caller's; a value's life (starting, stopping) is the caller's too.
type streamRegistry[T any] struct {
	mu      sync.RWMutex
	byName  map[string]T
	ordered []regEntry[T] // the order of Add (Reorder changes it)
	names   []string      // sorted; replaced on change, never modified
}

type regEntry[T any] struct {
	name string
	v    T
}

// newStreamRegistry returns an empty streamRegistry.
func newStreamRegistry[T any]() *streamRegistry[T] {
	return &streamRegistry[T]{byName: map[string]T{}, names: []string{}}
}

// Get returns the value served at name, or the zero T.
func (r *streamRegistry[T]) Get(name string) T {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.byName[name]
}

// List returns the values in order; the slice is the caller's.
func (r *streamRegistry[T]) List() []T {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]T, len(r.ordered))
	for i, e := range r.ordered {
		out[i] = e.v
	}
	return out
}

// Names returns the sorted names served (shared: do not modify it).
func (r *streamRegistry[T]) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.names
}

// Add serves v at name, last in order; from now on Get finds it. A value
// already at name is replaced.
func (r *streamRegistry[T]) Add(name string, v T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.byName[name]; ok {
		r.deleteLocked(name)
	}
	r.byName[name] = v
	r.ordered = append(r.ordered, regEntry[T]{name, v})
	r.renameLocked()
}

// Remove takes the value named name out and returns it (the zero T and
// false when none): from now on Get does not find it.
func (r *streamRegistry[T]) Remove(name string) (T, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.byName[name]
	if !ok {
		return v, false
	}
	r.deleteLocked(name)
	r.renameLocked()
	return v, true
}

func (r *streamRegistry[T]) deleteLocked(name string) {
	delete(r.byName, name)
	r.ordered = slices.DeleteFunc(slices.Clone(r.ordered), func(e regEntry[T]) bool { return e.name == name })
}

// Reorder puts the values in the order of names (those not named keep
// their order, after them).
func (r *streamRegistry[T]) Reorder(names []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rank := make(map[string]int, len(names))
	for i, n := range names {
		rank[n] = i
	}
	ordered := slices.Clone(r.ordered)
	sort.SliceStable(ordered, func(i, j int) bool {
		ri, iok := rank[ordered[i].name]
		rj, jok := rank[ordered[j].name]
		switch {
		case iok && jok:
			return ri < rj
		default:
			return iok && !jok
		}
	})
	r.ordered = ordered
}

func (r *streamRegistry[T]) renameLocked() {
	names := make([]string, 0, len(r.byName))
	for n := range r.byName {
		names = append(names, n)
	}
	sort.Strings(names)
	r.names = names
}
