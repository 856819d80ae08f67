package broker

import (
	"strings"
	"testing"

	"github.com/streamcast/streamcast/pkg/wire"
)

// TestDeeplyNestedFramesSayTheNestingIsTooDeep: a row nested past the
// decoder's limit is valid JSON, so the answer says it is too deep and
// gives the limit, never "not JSON" (which encoding/json answered for a
// frame nested 10,001 deep, as it gives up on it).
func TestDeeplyNestedFramesSayTheNestingIsTooDeep(t *testing.T) {
	srv := startServer(t, testConfig(t))
	p := dialPublisher(t, srv, "raw")
	nested := func(d int) string { return `{"a":` + strings.Repeat("[", d) + strings.Repeat("]", d) + `}` }
	for _, frame := range []string{nested(600), nested(10001), nested(20000), "[" + trade(1) + "," + nested(10001) + "]"} {
		r := p.roundTrip(frame)
		if r.Error == "" || !strings.Contains(r.Detail, "nested deeper than 512 levels") || strings.Contains(r.Detail, "JSON") {
			t.Errorf("a frame of %d bytes nested too deep answered %s %q, want a refusal saying it is nested deeper than 512 levels", len(frame), r.Error, r.Detail)
		}
	}
	if r := p.roundTrip(trade(1)); r.Error != "" {
		t.Fatalf("the connection is unusable after deep frames: %+v", r)
	}
	// The same for a where= filter.
	deep := `{"a":` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + `}`
	_, _, err := dial(t, whereURL(srv, []byte(deep)))
	if code, reason := closeOf(err); code != wire.CloseBadRequest || !strings.Contains(reason, "nested deeper than 512") {
		t.Errorf("a where= nested 600 deep: close %d %q, want 4400 saying it is nested too deep", code, reason)
	}
}
