package lifecycle

import (
	"context"
	"fmt"
	"time"

	"github.com/streamcast/streamcast/pkg/meta"
)

// Retirement is what Retire did.
type Retirement struct {
	Stream string
	Log    string // the log that ended the stream
	// At (µs since the epoch, UTC) and EndOffset are the retirement the
	// metadata records: the stream ended at EndOffset, its last offset + 1.
	At, EndOffset int64
	// Already: the stream was retired before; nothing was done.
	Already bool
	// Resumed: an interrupted retire was found and finished.
	Resumed bool
	// Version is the metadata version that records the retirement.
	Version int
	Timings Timings
}

// retirePlan is the retire intent's fields.
type retirePlan struct {
	Log string `json:"log"`
	At  int64  `json:"at"`
}

// Retire ends the stream, offline: it records the intent, seals and
// publishes every row of the current log and fences it for good, then
// commits the retirement {at, end_offset} with the log's state retired and
// clears the intent. A retire killed at any step finishes when Retire runs
// again, with the same at and end. A retired stream stays readable (serve
// replays it from whichever tier holds the rows) and takes no rows: serve
// refuses its publishers with 4410. Retiring a retired stream is a no-op
// (Already).
func Retire(ctx context.Context, s Stream, o Options) (*Retirement, error) {
	const what = "retire"
	t0 := time.Now()
	ses, err := resolve(ctx, s, o, what)
	if err != nil {
		return nil, err
	}
	defer ses.close()
	md := ses.md
	ret := &Retirement{Stream: s.Name}
	if md.Retired() && md.Intent == nil {
		ret.Log, ret.At, ret.EndOffset, ret.Already, ret.Version = md.Current().Name, md.Retirement.At, md.Retirement.EndOffset, true, md.Version
		return ret, nil
	}
	var plan retirePlan
	switch in := md.Intent; {
	case in != nil && in.Kind == KindRetire:
		if err := in.Decode(&plan); err != nil || plan.Log == "" {
			return nil, fmt.Errorf("%s stream %q: its metadata version %d records a retire intent this streamcast cannot read (%v); restore a version from before it", what, s.Name, md.Version, err)
		}
		ret.Resumed = true
	case in != nil:
		return nil, pendingError(md, what)
	default:
		plan = retirePlan{Log: md.Current().Name, At: o.Clock.Now().UnixMicro()}
	}
	if cur := md.Current(); cur.Name != plan.Log {
		return nil, fmt.Errorf("%s stream %q: its retire intent (metadata version %d) names log %s, but the metadata's current log is %s; restore a version from before the intent",
			what, s.Name, md.Version, plan.Log, cur.Name)
	}
	ret.Log, ret.At = plan.Log, plan.At
	if err := ses.openCurrent(what); err != nil {
		return nil, err
	}
	if !ret.Resumed {
		done := func(*meta.Metadata) error { return errDone } // retired meanwhile: nothing left to do
		if err := ses.recordIntent(ctx, what, KindRetire, plan, plan.Log, done); err != nil {
			return nil, err
		}
	}
	ret.Timings.Metadata += time.Since(t0)
	o.after(StepIntent)

	end, err := ses.finish(ctx, what, &ret.Timings)
	if err != nil {
		return nil, err
	}
	ret.EndOffset = end

	t1 := time.Now()
	err = ses.update(ctx, func(m *meta.Metadata) error {
		if m.Retired() && m.Intent == nil {
			return errDone
		}
		if m.Intent == nil || m.Intent.Kind != KindRetire || m.Current().Name != plan.Log {
			return fmt.Errorf("the metadata changed under the retire (version %d no longer records its intent); run retire again", m.Version)
		}
		cur := m.Current()
		cur.State, cur.EndOffset = meta.Retired, &end
		m.Retirement = &meta.Retirement{At: plan.At, EndOffset: end}
		if err := m.RollUp(ctx, plan.Log, ses.lg); err != nil { // final: its files hold every row
			return err
		}
		m.Intent = nil
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s stream %q: record the retirement: %w", what, s.Name, err)
	}
	ret.Version = ses.md.Version
	if r := ses.md.Retirement; r != nil {
		ret.At, ret.EndOffset = r.At, r.EndOffset
	}
	ret.Timings.Metadata += time.Since(t1)
	o.after(StepCommitted)
	return ret, nil
}
