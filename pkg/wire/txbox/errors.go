package txbox

import "fmt"

// StreamMismatch is the refusal of a state table bound to another stream:
// the stream was deleted and recreated (or the URL now names another one)
// since this outbox or inbox first connected. Nothing was sent or received.
type StreamMismatch struct {
	Table  string // the state table holding the binding
	Key    string // the publisher or subscriber id whose row holds it
	Stored string // the stream id bound at the first connect
	Got    string // the stream id the broker greeted with now
}

// Error names both ids and the way out.
func (e *StreamMismatch) Error() string {
	return fmt.Sprintf("txbox: %s %q is bound to stream id %s, but the broker now serves stream id %s: "+
		"the stream was recreated or the URL names another stream; point the URL at the original stream, "+
		"or delete the %q row of %s to bind it to the new one", e.Table, e.Key, e.Stored, e.Got, e.Key, e.Table)
}
