package cmd

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// progressLine is one line of progress redrawn in place on a terminal
// (ingest, snapshot), at most five times a second; when on is false
// (not a terminal) it draws nothing.
type progressLine struct {
	w     io.Writer
	on    bool
	start time.Time
	mu    sync.Mutex
	last  time.Time
	drawn bool
}

func newProgressLine(w io.Writer, on bool) *progressLine {
	return &progressLine{w: w, on: on, start: time.Now()}
}

// draw redraws the line that text builds from the time since the start,
// unless a line was drawn less than 200 ms ago.
func (p *progressLine) draw(text func(elapsed time.Duration) string) {
	if !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if now.Sub(p.last) < 200*time.Millisecond {
		return
	}
	p.last = now
	fmt.Fprintf(p.w, "\r\033[K%s", text(now.Sub(p.start)))
	p.drawn = true
}

// clear erases the line, when one was drawn.
func (p *progressLine) clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
		p.drawn = false
	}
}
