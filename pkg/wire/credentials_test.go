package wire

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

func TestSplitCredentialsDecodesAndDropsThem(t *testing.T) {
	clean, cred, err := SplitCredentials("ws://al%3Aice:p%40ss%20w%2Frd@127.0.0.1:8765/trades?offset=3")
	if err != nil {
		t.Fatal(err)
	}
	pw, _ := cred.Password()
	if clean != "ws://127.0.0.1:8765/trades?offset=3" || cred.Username() != "al:ice" || pw != "p@ss w/rd" {
		t.Fatalf("got %q, %q, %q", clean, cred.Username(), pw)
	}
	if clean, cred, err := SplitCredentials("ws://127.0.0.1:8765/trades"); err != nil || cred != nil || clean != "ws://127.0.0.1:8765/trades" {
		t.Fatalf("a URL without credentials: %q %v %v", clean, cred, err)
	}
	if _, _, err := SplitCredentials("ws://alice:hunter2@[::1/trades"); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("a URL that does not parse: %v", err)
	}
}

// TestClientErrorsNeverQuoteCredentials: whatever fails, the message names
// the URL without its user info.
func TestClientErrorsNeverQuoteCredentials(t *testing.T) {
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		w.Header().Set("WWW-Authenticate", `Basic realm="streamcast"`)
		http.Error(w, "no", http.StatusUnauthorized)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	ctx := context.Background()
	for _, raw := range []string{
		"ws://alice:hunter2@" + host + "/trades",
		"ws://alice:hunter2@" + host + "/trades?bogus=1",
		"ftp://alice:hunter2@" + host + "/trades",
		"ws://alice:hunter2@[::1/trades",
	} {
		_, err := Subscribe(ctx, raw, SubscribeOptions{})
		if err == nil || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: %v", strings.ReplaceAll(raw, "hunter2", "***"), err)
		}
	}
	// The first one reached the server with Basic credentials.
	if h := got.Get("Authorization"); h != BasicAuthorization(url.UserPassword("alice", "hunter2")) {
		t.Fatalf("the handshake sent Authorization %q", h)
	}
	_, err := Subscribe(ctx, "ws://"+host+"/trades", SubscribeOptions{DialOptions: DialOptions{Credentials: url.UserPassword("bob", "pw")}})
	if ad, ok := err.(*AccessDenied); !ok || ad.Status != 401 || ad.User != "bob" {
		t.Fatalf("401 with DialOptions.Credentials: %v", err)
	}
	if got.Get("Authorization") != BasicAuthorization(url.UserPassword("bob", "pw")) {
		t.Fatal("DialOptions.Credentials were not sent")
	}
}
