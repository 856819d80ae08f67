package broker

import (
	"testing"
	"time"
)

func TestStoppingRefusesNewConnectionsAndReaders(t *testing.T) {
	var l attached[int]
	if !l.Register(1) || !l.AddReader(0) {
		t.Fatal("a serving stream refused a connection or a reader")
	}
	l.ReaderDone()
	conns := l.BeginStop("stream_stopped")
	if len(conns) != 1 || conns[0] != 1 {
		t.Fatalf("BeginStop returned %v, want [1]", conns)
	}
	if l.Register(2) {
		t.Error("a stopping stream took a new connection")
	}
	if l.AddReader(0) {
		t.Error("a stopping stream took a new publisher reader")
	}
	l.Unregister(1)
	if !l.WaitConns(conns, time.Second, func(int) { t.Error("aborted a connection that had ended") }) {
		t.Error("WaitConns timed out with no connection left")
	}
}

func TestFenceRefusesReadersOfTheOldGeneration(t *testing.T) {
	var l attached[int]
	gen := l.Generation()
	l.Fence("stream_migrating")
	if l.AddReader(gen) {
		t.Error("a fenced stream took a publisher reader")
	}
	l.Unfence(true)
	if l.AddReader(gen) {
		t.Error("a reader built before the log swap was taken")
	}
	if !l.AddReader(l.Generation()) {
		t.Error("a reader of the new generation was refused")
	}
	l.ReaderDone()
}

func TestWaitConnsAbortsWhatOutlivesTheGrace(t *testing.T) {
	var l attached[int]
	l.Register(7)
	var aborted []int
	ok := l.WaitConns(l.Conns(), 10*time.Millisecond, func(c int) {
		aborted = append(aborted, c)
		l.Unregister(c) // the connection ends once aborted
	})
	if ok || len(aborted) != 1 || aborted[0] != 7 {
		t.Fatalf("WaitConns = %v, aborted %v; want false, [7]", ok, aborted)
	}
}
