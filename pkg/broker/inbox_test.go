package broker

import (
	"slices"
	"testing"
	"time"
)

// followPeak follows the most rows in ever holds queued at once, through
// its queued hook, and returns what reads it. Call it before the Puts it
// should see.
func followPeak[J any](in *commitInbox[J]) (peak func() int) {
	most := 0 // guarded by in.mu: the hook runs with it held
	in.mu.Lock()
	in.queued = func(rows int) { most = max(most, rows) }
	in.mu.Unlock()
	return func() int {
		in.mu.Lock()
		defer in.mu.Unlock()
		return most
	}
}

func TestTakeGroupsUpToMaxRowsInOrder(t *testing.T) {
	var in commitInbox[string]
	in.Init(100)
	peak := followPeak(&in)
	for _, j := range []struct {
		name string
		rows int
	}{{"a", 3}, {"b", 4}, {"c", 5}} {
		if !in.Put(j.name, j.rows) {
			t.Fatalf("Put(%s) refused on an open inbox", j.name)
		}
	}
	if got := in.Take(true, 8, nil); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("group Take = %v, want [a b] (c would pass 8 rows)", got)
	}
	if got := in.Take(false, 8, nil); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("Take = %v, want [c]", got)
	}
	if in.Rows() != 12 || peak() != 12 {
		t.Fatalf("rows %d, peak %d before Release; want 12, 12", in.Rows(), peak())
	}
	in.Release(12)
	in.Close()
	if in.Put("d", 1) {
		t.Error("a closed inbox took a job")
	}
	if got := in.Take(true, 8, nil); got != nil {
		t.Errorf("Take on a closed, empty inbox = %v, want nil", got)
	}
}

func TestPutWaitsForRoomUnderTheBound(t *testing.T) {
	var in commitInbox[int]
	in.Init(10)
	peak := followPeak(&in)
	in.Put(1, 8)
	// The hook runs with the lock held, just before Put waits: once it
	// has signalled, Take and Release below can only run while Put waits.
	waiting := make(chan struct{}, 1)
	in.waiting = func() {
		select {
		case waiting <- struct{}{}:
		default:
		}
	}
	put := make(chan bool)
	go func() { put <- in.Put(2, 5) }()
	select {
	case <-put:
		t.Fatal("Put went past max rows without waiting for room")
	case <-waiting:
	case <-time.After(10 * time.Second):
		t.Fatal("Put neither returned nor waited for room within 10s")
	}
	if n := in.Rows(); n != 8 {
		t.Fatalf("%d rows queued while Put waits, want 8: the waiting job must not count yet", n)
	}
	in.Take(false, 10, nil)
	in.Release(8)
	select {
	case ok := <-put:
		if !ok || peak() > 10 {
			t.Fatalf("Put = %v, peak %d; want true, at most 10", ok, peak())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Put still waiting after the room was released")
	}
}
