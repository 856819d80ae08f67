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

// StateOp says what a StateError was doing with InboxStateTable.
type StateOp int

// The operations of a StateError.
const (
	StateCreate StateOp = iota + 1 // creating the table
	StateRead                      // reading a subscriber's row
	StateWrite                     // binding, locking or moving a subscriber's row
	StateGone                      // a subscriber's row vanished while it ran
)

// StateError is a failure on InboxStateTable, where an inbox, and a table
// Land fills, keep their place: the table could not be created, a row
// could not be read or written, or a subscriber's row was deleted while
// it ran. A caller that words errors for its own users (the command line,
// which never made that table) branches on Op; Error is worded for a
// program that created the tables from DDL.
type StateError struct {
	Op         StateOp
	Subscriber string // the subscriber whose row it was ("" for StateCreate)
	// DDL is, for StateCreate, the statement that creates the table, for
	// whoever may run it.
	DDL string
	Err error  // the database's error; nil for StateGone
	msg string // the library's wording
}

// Error says what failed, naming the table.
func (e *StateError) Error() string { return e.msg }

// Unwrap returns the database's error.
func (e *StateError) Unwrap() error { return e.Err }

// stateError builds a StateError whose message is "txbox: " + what (with
// ": " + err when err is set) + then.
func stateError(op StateOp, subscriber string, err error, what, then string) *StateError {
	msg := "txbox: " + what
	if err != nil {
		msg += ": " + err.Error()
	}
	return &StateError{Op: op, Subscriber: subscriber, Err: err, msg: msg + then}
}
