package console_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/chromedp"
	"golang.org/x/crypto/bcrypt"

	"github.com/streamcast/streamcast/internal/testkit/brokertest"
	"github.com/streamcast/streamcast/pkg/meta/config"
)

func hash(t *testing.T, pw string) string {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	return string(h)
}

// answerLogins answers every Basic prompt of the tab with user and
// password, as a person typing into the browser's dialog would, and
// counts the prompts.
func answerLogins(t *testing.T, ctx context.Context, user, password string) *atomic.Int64 {
	t.Helper()
	var prompts atomic.Int64
	auths := chromedp.Events(ctx, fetch.AuthRequired)
	paused := chromedp.Events(ctx, fetch.RequestPaused)
	if _, err := chromedp.Call(ctx, fetch.Enable, fetch.EnableParams{HandleAuthRequests: ptr(true)}); err != nil {
		t.Fatal(err)
	}
	go func() {
		for ev, err := range paused {
			if err != nil {
				return
			}
			_, _ = chromedp.Call(ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID})
		}
	}()
	go func() {
		for ev, err := range auths {
			if err != nil {
				return
			}
			prompts.Add(1)
			_, _ = chromedp.Call(ctx, fetch.ContinueWithAuth, fetch.ContinueWithAuthParams{
				RequestID: ev.RequestID,
				AuthChallengeResponse: &fetch.AuthChallengeResponse{
					Response: fetch.AuthChallengeResponseResponseProvideCredentials, Username: user, Password: password,
				},
			})
		}
	}()
	return &prompts
}

func ptr[T any](v T) *T { return &v }

// TestConsoleAsksForALoginAndShowsOnlyGrantedStreams serves the console
// under an auth: section that lets anonymous users nothing: the page asks
// for a login with the browser's Basic prompt, then lists only the stream
// the user holds stats on, and tails it over the WebSocket with the same
// login.
func TestConsoleAsksForALoginAndShowsOnlyGrantedStreams(t *testing.T) {
	ctx, errs := startBrowser(t)
	cfg := tradesConfig("127.0.0.1:0", t.TempDir())
	cfg.Auth = &config.Auth{
		Users: []config.User{{Name: "alice", PasswordHash: hash(t, "alice-pw")}, {Name: "pub", PasswordHash: hash(t, "pub-pw")}},
		Grants: []config.Grant{
			{Principals: []string{"alice"}, Actions: []string{config.ActionRead, config.ActionStats}, Streams: []string{"trades"}},
			{Principals: []string{"pub"}, Actions: []string{config.ActionPublish}, Streams: []string{"trades"}},
		},
	}
	base := brokertest.Start(t, cfg)
	hostPort := strings.TrimPrefix(base, "ws://")

	// Without credentials the page is a 401 with the Basic challenge.
	res, err := http.Get("http://" + hostPort + "/")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(res.Header.Get("WWW-Authenticate"), "Basic") {
		t.Fatalf("GET / without credentials: %d %q; want 401 with a Basic challenge", res.StatusCode, res.Header.Get("WWW-Authenticate"))
	}

	prompts := answerLogins(t, ctx, "alice", "alice-pw")
	load(t, "ws://pub:pub-pw@"+hostPort, "trades", 1000, 0)
	if err := chromedp.Do(ctx, chromedp.Navigate("http://"+hostPort+"/")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, 5*time.Second, "the trades row", `!!document.querySelector('tr[data-stream="trades"] td.end')`, `document.body.innerText`)
	if n := prompts.Load(); n < 1 {
		t.Fatalf("the browser was asked for a login %d times; want the Basic prompt", n)
	}
	streams, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#streams tbody tr")].map((r) => r.dataset.stream)`))
	if err != nil {
		t.Fatal(err)
	}
	if len(streams) != 1 || streams[0] != "trades" {
		t.Fatalf("alice sees streams %q; want only trades, the one she holds stats on", streams)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate("http://"+hostPort+"/#/s/trades")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, 5*time.Second, "rows in the tail", `Number(document.querySelector("#tail").dataset.received) >= 100`, `document.querySelector("#tail-status").textContent`)
	if e := errs.List(); len(e) > 0 {
		t.Fatalf("the page logged errors: %q", e)
	}
}
