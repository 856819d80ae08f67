package ndjson

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/streamcast/streamcast/pkg/wire"
)

func TestTheDefaultOptionsAreValid(t *testing.T) {
	lo := DefaultLoadOptions()
	lo.Stdin = strings.NewReader("")
	if err := lo.Validate(); err != nil {
		t.Errorf("DefaultLoadOptions: %v", err)
	}
	to := DefaultTailOptions()
	if err := to.Validate(); err != nil {
		t.Errorf("DefaultTailOptions: %v", err)
	}
}

func TestLoadOptionsRefuseWhatTheyCannotDoInsteadOfClampingIt(t *testing.T) {
	tests := []struct {
		name string
		set  func(*LoadOptions)
		want string
	}{
		{"batch size 0", func(o *LoadOptions) { o.BatchSize = 0 }, "--batch-size is 0; give 1 or more"},
		{"negative batch size", func(o *LoadOptions) { o.BatchSize = -3 }, "--batch-size is -3"},
		{"no frame in flight", func(o *LoadOptions) { o.MaxInFlight = 0 }, "--max-in-flight is 0"},
		{"a frame too small for a row", func(o *LoadOptions) { o.MaxFrameBytes = frameOverhead }, "--max-frame-bytes is 32"},
		{"negative window", func(o *LoadOptions) { o.Window = -time.Second }, "--window is -1s"},
		{"follow without a poll interval", func(o *LoadOptions) { o.Follow, o.PollEvery = true, 0 }, "--poll is 0s"},
		{"progress without an interval", func(o *LoadOptions) { o.Progress, o.ProgressEvery = func(LoadSummary) {}, 0 }, "progress interval is 0s"},
		{"publisher id too long", func(o *LoadOptions) { o.Publisher = strings.Repeat("p", wire.MaxPublisherBytes+1) }, "--publisher is 129 bytes"},
		{"stdin named without a reader", func(o *LoadOptions) { o.Inputs, o.Stdin = []string{"a.ndjson", StdinName}, nil }, "no input"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := DefaultLoadOptions()
			o.Stdin = strings.NewReader("")
			tt.set(&o)
			before := o
			err := o.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate: %v, want an error containing %q", err, tt.want)
			}
			if o.BatchSize != before.BatchSize || o.MaxInFlight != before.MaxInFlight || o.PollEvery != before.PollEvery {
				t.Errorf("Validate changed the options: %+v, was %+v", o, before)
			}
		})
	}
}

func TestLoadRefusesABatchSizeOfZeroBeforeConnecting(t *testing.T) {
	url, frames := markServer(t, 0, func(string) string { return `{"ok":[7]}` })
	o := DefaultLoadOptions()
	o.Stdin = strings.NewReader("{\"side\":1}\n")
	o.BatchSize = 0
	sum, err := Load(ctxT(t), url+"/t", o)
	if err == nil || !strings.Contains(err.Error(), "--batch-size is 0") {
		t.Fatalf("Load with batch size 0: %v, want the refusal", err)
	}
	if sum.LinesRead != 0 || len(frames()) != 0 {
		t.Errorf("a refused load read %d lines and sent %d frames; want nothing", sum.LinesRead, len(frames()))
	}
}

func TestTailOptionsRefuseWhatTheyCannotDo(t *testing.T) {
	tests := []struct {
		name string
		set  func(*TailOptions)
		want string
	}{
		{"negative offset", func(o *TailOptions) { o.Offset = wire.At(-1) }, "--offset -1 is negative"},
		{"where not an object", func(o *TailOptions) { o.Where = []byte(`[1]`) }, "--where [1] is not a JSON object"},
		{"where not JSON", func(o *TailOptions) { o.Where = []byte(`{"side":`) }, "is not a JSON object"},
		{"negative count", func(o *TailOptions) { o.Count = -1 }, "--count is -1"},
		{"no backoff", func(o *TailOptions) { o.MinBackoff = 0 }, "least reconnect backoff is 0s"},
		{"backoff cap below its floor", func(o *TailOptions) { o.MinBackoff, o.MaxBackoff = time.Second, time.Millisecond }, "below the least"},
		{"no output batch", func(o *TailOptions) { o.BatchBytes = 0 }, "output batch is 0 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := DefaultTailOptions()
			tt.set(&o)
			if err := o.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate: %v, want an error containing %q", err, tt.want)
			}
			// Tail itself refuses them too, before it connects anywhere.
			if _, err := Tail(ctxT(t), "ws://127.0.0.1:1/nowhere", &bytes.Buffer{}, o); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Tail: %v, want the same refusal", err)
			}
		})
	}
}
