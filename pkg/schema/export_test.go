package schema

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
)

// CheckArrow reports whether cols are arrays of the declared columns'
// types, in order, as AppendJSON and the filters need.
func (s *Schema) CheckArrow(cols []arrow.Array) error {
	if len(cols) != len(s.root.fields) {
		return fmt.Errorf("schema: %d arrays for %d columns", len(cols), len(s.root.fields))
	}
	for k, f := range s.root.fields {
		if !arrow.TypeEqual(cols[k].DataType(), f.dtype) {
			return fmt.Errorf("schema: column %q is %s in the batch, but the schema says %s", f.name, cols[k].DataType(), f.dtype)
		}
	}
	return nil
}

// MatchRow reports whether a row decoded by the filter's schema matches,
// reading each term's value from the row's decoded spans; the tests hold
// it to MatchCanonical and MatchArrow, row by row.
func (f *Filter) MatchRow(r *Row) bool {
	if f.All() {
		return true
	}
	if f.s.any || r.schema != f.s {
		return f.MatchCanonical(r.Canonical)
	}
	for i := range f.terms {
		t := &f.terms[i]
		sp := r.dec.spans[t.col]
		if !f.matchCanon(t, r.Canonical[sp.start:sp.end]) {
			return false
		}
	}
	return true
}
