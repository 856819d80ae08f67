package broker

import (
	"runtime/debug"
	"testing"
)

// TestGCHeadroomNarrowsWhileFiltersHoldMuch: the collector's percentage is
// halved once the filters hold gcTightenAt bytes, kept while they hold
// gcRelaxAt or more, and set back below that.
func TestGCHeadroomNarrowsWhileFiltersHoldMuch(t *testing.T) {
	old := debug.SetGCPercent(200)
	t.Cleanup(func() { debug.SetGCPercent(old) })
	percent := func() int {
		p := debug.SetGCPercent(200)
		debug.SetGCPercent(p)
		return p
	}
	g := newGCHeadroom()
	for _, step := range []struct {
		held int64
		want int
	}{
		{gcTightenAt - 1, 200},
		{gcTightenAt, 100},
		{gcRelaxAt, 100},
		{gcRelaxAt - 1, 200},
		{0, 200},
	} {
		g.update(step.held)
		if got := percent(); got != step.want {
			t.Fatalf("with %d bytes of filters the GC percentage is %d, want %d", step.held, got, step.want)
		}
	}
	var off *gcHeadroom // Options.TuneGC unset
	off.update(gcTightenAt)
	if got := percent(); got != 200 {
		t.Fatalf("a server without TuneGC set the GC percentage to %d", got)
	}
}
