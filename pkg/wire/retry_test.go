package wire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
)

func TestRetryableSeparatesDropsFromEnds(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"going away", &GoingAway{}, true},
		{"too slow, wrapped", fmt.Errorf("recv: %w", &TooSlow{}), true},
		{"other close", &CloseError{}, true},
		{"network", errors.New("connection reset by peer"), true},
		{"access denied", &AccessDenied{}, false},
		{"refusal", &NotReplayable{}, false},
		{"protocol", &ProtocolError{}, false},
		{"clean end", io.EOF, false},
		{"cancelled", context.Canceled, false},
	} {
		if got := Retryable(tc.err); got != tc.want {
			t.Errorf("%s: Retryable = %v, want %v", tc.name, got, tc.want)
		}
	}
}
