package wire

import (
	"context"
	"errors"
	"io"
)

// Retryable reports whether a client that follows a stream should connect
// again after err: the server going away (1001), dropping a slow reader
// (4429) or closing otherwise, or the network failing (a dial failure, a
// reset, a timeout), or a login refused for the server's load (503).
// Refusals, protocol errors, a denied login (the same credentials get the
// same answer), a clean end and the caller's own
// cancellation are final. Callers with errors of their own decide those
// first.
func Retryable(err error) bool {
	var (
		ga *GoingAway
		ts *TooSlow
		ce *CloseError
		pe *ProtocolError
		re Refusal
		ad *AccessDenied
	)
	switch {
	case errors.As(err, &ad):
		return ad.Busy()
	case errors.As(err, &ga), errors.As(err, &ts), errors.As(err, &ce):
		return true
	case errors.Is(err, io.EOF), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	case errors.As(err, &pe), errors.As(err, &re):
		return false
	}
	return true
}
