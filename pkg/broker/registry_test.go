package broker

import (
	"slices"
	"testing"
)

// TestRegistryKeepsOrderAndSortedNames: List follows Add, then Reorder
// (names not given keep their order, after the others); Names is sorted;
// a removed name is found no more, and lists handed out earlier stay as
// they were.
func TestRegistryKeepsOrderAndSortedNames(t *testing.T) {
	r := newStreamRegistry[*int]()
	vals := map[string]*int{}
	for i, n := range []string{"c", "a", "d", "b"} {
		v := i
		vals[n] = &v
		r.Add(n, &v)
	}
	names := func(l []*int) []string {
		var out []string
		for _, v := range l {
			for n, w := range vals {
				if w == v {
					out = append(out, n)
				}
			}
		}
		return out
	}
	if got := names(r.List()); !slices.Equal(got, []string{"c", "a", "d", "b"}) {
		t.Fatalf("List after Add: %v", got)
	}
	if got := r.Names(); !slices.Equal(got, []string{"a", "b", "c", "d"}) {
		t.Fatalf("Names: %v, want sorted", got)
	}
	before := r.List()
	r.Reorder([]string{"b", "a", "zz"})
	if got := names(r.List()); !slices.Equal(got, []string{"b", "a", "c", "d"}) {
		t.Fatalf("List after Reorder: %v", got)
	}
	if v, ok := r.Remove("a"); !ok || v != vals["a"] {
		t.Fatalf("Remove(a) = %v, %v", v, ok)
	}
	if r.Get("a") != nil || r.Get("b") != vals["b"] {
		t.Fatal("Get after Remove: a still found, or b lost")
	}
	if _, ok := r.Remove("a"); ok {
		t.Fatal("a removed twice")
	}
	if got := r.Names(); !slices.Equal(got, []string{"b", "c", "d"}) {
		t.Fatalf("Names after Remove: %v", got)
	}
	if got := names(before); !slices.Equal(got, []string{"c", "a", "d", "b"}) {
		t.Fatalf("a list handed out before changed to %v", got)
	}
}
