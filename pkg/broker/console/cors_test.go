package console_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/streamcast/streamcast/internal/testkit/brokertest"
	"github.com/streamcast/streamcast/pkg/meta/config"
)

// TestAnAllowedOriginsPagePublishesWithFetch: a page of another site
// publishes to a server that lists the site's origin in
// allowed_origins and asks for credentials, with fetch: a JSON body and an
// Authorization header, so the browser sends a CORS preflight first. The
// POST commits and the page reads the offsets; a wrong password's 401 is
// readable too, and nothing of it is committed.
func TestAnAllowedOriginsPagePublishesWithFetch(t *testing.T) {
	ctx, _ := startBrowser(t)
	// The page is another site's: a plain one (the console's own
	// Content-Security-Policy lets it connect to its server only).
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "<!doctype html><title>another site</title>")
	}))
	defer site.Close()
	page := strings.TrimPrefix(site.URL, "http://")
	cfg := tradesConfig("127.0.0.1:0", t.TempDir())
	cfg.AllowedOrigins = []string{"http://" + page}
	cfg.Auth = &config.Auth{
		Users:  []config.User{{Name: "pub", PasswordHash: hash(t, "pub-pw")}},
		Grants: []config.Grant{{Principals: []string{"pub"}, Actions: []string{config.ActionPublish, config.ActionRead}, Streams: []string{"trades"}}},
	}
	target := "http://" + strings.TrimPrefix(brokertest.Start(t, cfg), "ws://") + "/trades"
	if err := chromedp.Do(ctx, chromedp.Navigate("http://"+page+"/")); err != nil {
		t.Fatal(err)
	}
	post := func(password string) string {
		return `fetch(` + jsString(target) + `, {method: "POST",
			headers: {"Content-Type": "application/json", "Authorization": "Basic " + btoa("pub:` + password + `")},
			body: ` + jsString("["+string(trade(0))+","+string(trade(1))+"]") + `})
			.then(r => r.text().then(body => ({status: r.status, body})))
			.catch(e => ({error: String(e)}))`
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
		window.results = [];
		`+post("wrong")+`.then(r => { results.push(r); return `+post("pub-pw")+`; }).then(r => results.push(r));
		return true;
	})()`)); err != nil {
		t.Fatal(err)
	}
	describe := `JSON.stringify(results)`
	waitJS(t, ctx, 10*time.Second, "both fetches answered", `results.length === 2`, describe)
	got, err := chromedp.Run(ctx, chromedp.Evaluate[string](describe))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got, `[{"status":401,`) || !strings.Contains(got, `{"status":200,"body":"{\"ok\":[1,2]}`) {
		t.Fatalf("the page's fetches answered %s; want a readable 401 for the wrong password, then 200 with offsets [1,2]", got)
	}
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}
