package auth

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/streamcast/streamcast/pkg/meta/config"
)

// TestStreamActionReadsTheQueryAsTheProtocolDoes: publish is asked only by
// a query that decodes and holds publish; anything else needs read.
func TestStreamActionReadsTheQueryAsTheProtocolDoes(t *testing.T) {
	for _, c := range []struct{ target, stream, action string }{
		{"/trades", "trades", config.ActionRead},
		{"/trades?offset=5", "trades", config.ActionRead},
		{"/trades?publish", "trades", config.ActionPublish},
		{"/trades?publish&publisher=p1", "trades", config.ActionPublish},
		{"/trades?publish&bad=%zz", "trades", config.ActionRead}, // refused 4400 after the upgrade
	} {
		stream, action := StreamAction(httptest.NewRequest(http.MethodGet, c.target, nil))
		if stream != c.stream || action != c.action {
			t.Errorf("%s: %s %s, want %s %s", c.target, stream, action, c.stream, c.action)
		}
	}
}

// TestRefusalIs401WithoutCredentialsAnd403With: the anonymous principal
// is asked for credentials; a named one is told it lacks the grant.
func TestRefusalIs401WithoutCredentialsAnd403With(t *testing.T) {
	if status, msg := Refusal(Access{Who: Anonymous}, "read stream \"x\""); status != http.StatusUnauthorized || !strings.Contains(msg, "authentication required") {
		t.Errorf("anonymous: %d %q", status, msg)
	}
	if status, msg := Refusal(Access{Who: "alice"}, "read stream \"x\""); status != http.StatusForbidden || !strings.Contains(msg, `user "alice" may not`) {
		t.Errorf("alice: %d %q", status, msg)
	}
}
