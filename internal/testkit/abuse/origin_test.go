package abuse

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// upgrade asks for a WebSocket at path with the given headers and returns
// the HTTP status (101 when it upgraded) and the body of a refusal.
func upgrade(t *testing.T, s *server, path string, h http.Header) (int, string) {
	t.Helper()
	ws, resp, err := dialer(0).Dial(s.url(path), h)
	if err == nil {
		ws.Close()
		return http.StatusSwitchingProtocols, ""
	}
	if resp == nil {
		t.Fatalf("upgrade %s: %v", path, err)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestAHealthUpgradeNeitherSkipsAuthNorListsStreams asks a server with an
// auth: section for a WebSocket at /health: without credentials it gets
// 401, as for any other upgrade, and with them a 403 or 400 (/health is
// plain HTTP) that names no stream. (It answered 4404 to anyone, listing
// every stream the server serves.)
func TestAHealthUpgradeNeitherSkipsAuthNorListsStreams(t *testing.T) {
	t.Parallel() // its own server process; see TestMain
	s := start(t, options{extra: authYAML(t)})
	if code, body := upgrade(t, s, "/health", nil); code != http.StatusUnauthorized {
		t.Errorf("an anonymous upgrade to /health: HTTP %d %q; want 401", code, body)
	}
	// alice may read t only, so /health is no stream she may read: 403;
	// bob may read every stream: 400, since /health is none.
	for user, c := range map[string]struct {
		pw   string
		want int
	}{"alice": {alicePW, http.StatusForbidden}, "bob": {bobPW, http.StatusBadRequest}} {
		code, body := upgrade(t, s, "/health", http.Header{"Authorization": {basicAuth(user, c.pw)}})
		if code != c.want || strings.Contains(body, `"t"`) {
			t.Errorf("%s's upgrade to /health: HTTP %d %q; want %d naming no stream", user, code, body, c.want)
		}
	}
	// A plain GET still needs nothing.
	resp, err := http.Get("http://" + s.addr + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /health: HTTP %d, want 200", resp.StatusCode)
	}
}

// TestCrossSiteWebSocketsAreRefusedUnderAuth opens WebSockets as a
// browser would for a logged-in user, with the user's Basic credentials
// and a page's Origin: with auth: set and no allowed_origins, a page of
// another site gets 403 before the upgrade, while the server's own pages
// and clients that send no Origin are served.
func TestCrossSiteWebSocketsAreRefusedUnderAuth(t *testing.T) {
	t.Parallel() // its own server process; see TestMain
	s := start(t, options{extra: authYAML(t)})
	creds := basicAuth("alice", alicePW)
	for _, c := range []struct {
		origin string
		want   int
	}{
		{"https://evil.example", http.StatusForbidden},
		{"http://" + s.addr, http.StatusSwitchingProtocols},
		{"", http.StatusSwitchingProtocols},
	} {
		h := http.Header{"Authorization": {creds}}
		if c.origin != "" {
			h.Set("Origin", c.origin)
		}
		if code, body := upgrade(t, s, "/t", h); code != c.want {
			t.Errorf("Origin %q: HTTP %d %q; want %d", c.origin, code, body, c.want)
		}
	}
}
