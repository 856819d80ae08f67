package broker

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/charmbracelet/log"
	"golang.org/x/crypto/bcrypt"

	"github.com/streamcast/streamcast/internal/testkit"
	"github.com/streamcast/streamcast/pkg/broker/auth"
	"github.com/streamcast/streamcast/pkg/meta/config"
	"github.com/streamcast/streamcast/pkg/wire"
)

// The test users' passwords: every log line of the tests that use them is
// searched for each, plain, percent-encoded and as a Basic header.
const (
	alicePW = "alice-Pw-3f9k"
	bobPW   = "bob-Pw-8q2z"
	carolPW = "carol-Pw-5m1x"
	wrongPW = "wrong-Pw-0000"
)

var hashCache sync.Map // password → bcrypt hash at the lowest cost

func testHash(t testing.TB, pw string) string {
	if h, ok := hashCache.Load(pw); ok {
		return h.(string)
	}
	h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	hashCache.Store(pw, string(h))
	return string(h)
}

// authConfig is testConfig (trades durable; live and raw live-only) with
// an auth: section:
//   - alice reads, publishes and sees stats of trades;
//   - bob reads streams starting with "li" (live);
//   - carol sees stats on "*";
//   - anonymous reads raw.
func authConfig(t testing.TB) config.Config {
	cfg := testConfig(t)
	cfg.Auth = &config.Auth{
		Users: []config.User{
			{Name: "alice", PasswordHash: testHash(t, alicePW)},
			{Name: "bob", PasswordHash: testHash(t, bobPW)},
			{Name: "carol", PasswordHash: testHash(t, carolPW)},
		},
		Grants: []config.Grant{
			{Principals: []string{"alice"}, Actions: []string{"read", "publish", "stats"}, Streams: []string{"trades"}},
			{Principals: []string{"bob"}, Actions: []string{"read"}, Streams: []string{"li*"}},
			{Principals: []string{"carol"}, Actions: []string{"stats"}, Streams: []string{"*"}},
			{Principals: []string{"anonymous"}, Actions: []string{"read"}, Streams: []string{"raw"}},
		},
	}
	return cfg
}

func basic(user, pw string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pw))
}

// rawRequest sends one HTTP/1.1 request over a fresh TCP connection to
// addr (a WebSocket upgrade when upgrade is set), with the Authorization
// value auth ("" for none), and returns the response; the body is read.
// It is the server's answer before any upgrade, with no client library
// in between.
func rawRequest(t *testing.T, addr, target, auth string, upgrade bool) (*http.Response, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "GET %s HTTP/1.1\r\nHost: %s\r\n", target, addr)
	if upgrade {
		b.WriteString("Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n")
	} else {
		b.WriteString("Connection: close\r\n")
	}
	if auth != "" {
		b.WriteString("Authorization: " + auth + "\r\n")
	}
	b.WriteString("\r\n")
	if _, err := io.WriteString(c, b.String()); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("%s: read response: %v", target, err)
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return resp, closeAfterUpgrade(t, br)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(body)
}

// closeAfterUpgrade reads the first frame the server sends after an
// upgrade and returns, for a close frame, "close CODE REASON", else
// "greeting".
func closeAfterUpgrade(t *testing.T, br *bufio.Reader) string {
	t.Helper()
	hdr := make([]byte, 2)
	if _, err := io.ReadFull(br, hdr); err != nil {
		t.Fatalf("read the first frame: %v", err)
	}
	n := int(hdr[1] & 0x7f)
	switch n {
	case 126:
		ext := make([]byte, 2)
		_, _ = io.ReadFull(br, ext)
		n = int(ext[0])<<8 | int(ext[1])
	case 127:
		ext := make([]byte, 8)
		_, _ = io.ReadFull(br, ext)
		n = 0
		for _, x := range ext {
			n = n<<8 | int(x)
		}
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(br, payload); err != nil {
		t.Fatalf("read the first frame's payload: %v", err)
	}
	if hdr[0]&0x0f == 0x8 && n >= 2 {
		return fmt.Sprintf("close %d %s", int(payload[0])<<8|int(payload[1]), payload[2:])
	}
	return "greeting"
}

// TestAuthMatrixIsAnsweredBeforeTheUpgrade checks, on raw HTTP, read,
// publish and stats for anonymous, a wrong password, a user without the
// grant and a user with it: 401 with a Basic challenge, 401, 403, and
// 101 or 200.
func TestAuthMatrixIsAnsweredBeforeTheUpgrade(t *testing.T) {
	logs := &testkit.SyncBuffer{}
	srv := startServer(t, authConfig(t), Options{Logger: log.NewWithOptions(logs, log.Options{Level: log.DebugLevel})})
	addr := srv.Addr().String()

	type who struct{ name, auth string }
	anon := who{"anonymous", ""}
	wrong := who{"a wrong password", basic("alice", wrongPW)}
	bob := who{"bob, without the grant", basic("bob", bobPW)}
	alice := who{"alice, with it", basic("alice", alicePW)}
	cases := []struct {
		action  string
		target  string
		upgrade bool
		who     who
		status  int
	}{
		{"read", "/trades", true, anon, 401},
		{"read", "/trades", true, wrong, 401},
		{"read", "/trades", true, bob, 403},
		{"read", "/trades", true, alice, 101},
		{"publish", "/trades?publish", true, anon, 401},
		{"publish", "/trades?publish", true, wrong, 401},
		{"publish", "/trades?publish", true, bob, 403},
		{"publish", "/trades?publish", true, alice, 101},
		{"stats", "/stats", false, anon, 401},
		{"stats", "/stats", false, wrong, 401}, // the third failure: still within the free ones
		{"stats", "/stats", false, bob, 403},
		{"stats", "/stats", false, alice, 200},
		// Before query parsing and stream lookup: an anonymous request
		// with a bad query, or for a stream that does not exist, learns
		// nothing but 401; a user without a grant on it gets 403.
		{"read", "/trades?nonsense=1", true, anon, 401},
		{"read", "/nosuch", true, anon, 401},
		{"read", "/nosuch", true, alice, 403},
		{"read", "/raw", true, anon, 101}, // anonymous's own grant
		{"publish", "/raw?publish", true, anon, 401},
		{"read", "/health", false, anon, 200}, // /health is open
	}
	for _, c := range cases {
		resp, body := rawRequest(t, addr, c.target, c.who.auth, c.upgrade)
		if resp.StatusCode != c.status {
			t.Errorf("%s %s as %s: HTTP %d, want %d (%s)", c.action, c.target, c.who.name, resp.StatusCode, c.status, body)
			continue
		}
		switch c.status {
		case 401:
			if got := resp.Header.Get("WWW-Authenticate"); got != `Basic realm="streamcast"` {
				t.Errorf("%s %s as %s: 401 with WWW-Authenticate %q", c.action, c.target, c.who.name, got)
			}
		case 101:
			if body != "greeting" {
				t.Errorf("%s %s as %s: upgraded, then %s", c.action, c.target, c.who.name, body)
			}
		}
	}
	// A query that does not parse, once authorised, is the protocol's
	// refusal after the upgrade.
	if _, body := rawRequest(t, addr, "/trades?nonsense=1", alice.auth, true); !strings.HasPrefix(body, "close 4400 ") {
		t.Errorf("alice with a bad query: %s, want close 4400", body)
	}
	checkNoSecrets(t, logs.String())
}

// TestUnknownStreamListsOnlyReadableStreams: after an authorised upgrade,
// 4404's serves names only what the principal may read.
func TestUnknownStreamListsOnlyReadableStreams(t *testing.T) {
	srv := startServer(t, authConfig(t))
	addr := srv.Addr().String()
	for _, c := range []struct {
		who, auth, want string
	}{
		// bob may read li* (so also the absent "lime") and raw (anonymous's).
		{"bob", basic("bob", bobPW), `close 4404 {"error":"no_such_stream","serves":["live","raw"]}`},
		{"anonymous", "", ""}, // no grant on "lime": 401, nothing listed
	} {
		resp, body := rawRequest(t, addr, "/lime", c.auth, true)
		if c.want == "" {
			if resp.StatusCode != 401 {
				t.Errorf("%s: HTTP %d, want 401", c.who, resp.StatusCode)
			}
			continue
		}
		if body != c.want {
			t.Errorf("%s asking for /lime: %s, want %s", c.who, body, c.want)
		}
	}
	// Without auth: every stream is listed.
	open := startServer(t, testConfig(t))
	if _, body := rawRequest(t, open.Addr().String(), "/lime", "", true); body != `close 4404 {"error":"no_such_stream","serves":["live","raw","trades"]}` {
		t.Errorf("without auth: %s", body)
	}
}

// TestStatsAreFilteredByGrant: /stats shows the streams the principal
// holds stats on, and the process figures only with stats on "*".
func TestStatsAreFilteredByGrant(t *testing.T) {
	srv := startServer(t, authConfig(t))
	addr := srv.Addr().String()
	read := func(auth string) (int, map[string]json.RawMessage, []string) {
		resp, body := rawRequest(t, addr, "/stats", auth, false)
		if resp.StatusCode != 200 {
			return resp.StatusCode, nil, nil
		}
		var doc map[string]json.RawMessage
		if err := json.Unmarshal([]byte(body), &doc); err != nil {
			t.Fatalf("/stats: %v: %s", err, body)
		}
		var st Stats
		_ = json.Unmarshal([]byte(body), &st)
		var names []string
		for _, s := range st.Streams {
			names = append(names, s.Name)
		}
		return 200, doc, names
	}
	code, doc, names := read(basic("alice", alicePW))
	if code != 200 || !slices.Equal(names, []string{"trades"}) {
		t.Fatalf("alice: HTTP %d, streams %v; want 200 and [trades]", code, names)
	}
	for _, k := range []string{"process", "children"} {
		if _, ok := doc[k]; ok {
			t.Errorf("alice (stats on trades only) sees %q", k)
		}
	}
	code, doc, names = read(basic("carol", carolPW))
	if code != 200 || !slices.Equal(names, []string{"trades", "live", "raw"}) {
		t.Fatalf("carol: HTTP %d, streams %v; want 200 and every stream", code, names)
	}
	if _, ok := doc["process"]; !ok {
		t.Error("carol (stats on *) does not see process")
	}
	if code, _, _ := read(basic("bob", bobPW)); code != 403 {
		t.Errorf("bob (no stats grant): HTTP %d, want 403", code)
	}
	if code, _, _ := read(""); code != 401 {
		t.Errorf("anonymous: HTTP %d, want 401", code)
	}
}

// TestMetricsAccessRule: /metrics needs stats on "*", unless public.
func TestMetricsAccessRule(t *testing.T) {
	srv := startServer(t, authConfig(t))
	pol := auth.New(srv.cfg.Auth, time.Now, nil) // the same grants as the gate's policy
	for _, c := range []struct {
		who    string
		public bool
		want   int
	}{
		{"carol", false, 200},
		{"alice", false, 403},
		{"anonymous", false, 401},
		{"anonymous", true, 200},
	} {
		r := httptestRequest(auth.Access{Policy: pol, Who: c.who})
		w := &statusRecorder{header: http.Header{}, status: 200}
		if srv.AuthorizeMetrics(w, r, c.public) != (c.want == 200) || w.status != c.want {
			t.Errorf("%s, public %v: HTTP %d, want %d", c.who, c.public, w.status, c.want)
		}
	}
	// Without auth: everyone.
	r := httptestRequest(auth.Access{})
	if !srv.AuthorizeMetrics(&statusRecorder{header: http.Header{}}, r, false) {
		t.Error("without an auth: section /metrics is refused")
	}
}

func httptestRequest(a auth.Access) *http.Request {
	r, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1/metrics", nil)
	return r.WithContext(auth.WithAccess(r.Context(), a))
}

type statusRecorder struct {
	header http.Header
	status int
}

func (s *statusRecorder) Header() http.Header         { return s.header }
func (s *statusRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (s *statusRecorder) WriteHeader(code int)        { s.status = code }

// TestClientsSendCredentialsAndNameTheRefusal: the Go client takes
// credentials from the URL (percent-decoded) or from DialOptions, never
// dials or prints the URL with them, and says 401 or 403.
func TestClientsSendCredentialsAndNameTheRefusal(t *testing.T) {
	cfg := authConfig(t)
	const oddPW = "p@ss:w/rd%"
	cfg.Auth.Users = append(cfg.Auth.Users, config.User{Name: "dave", PasswordHash: testHash(t, oddPW)})
	cfg.Auth.Grants = append(cfg.Auth.Grants, config.Grant{Principals: []string{"dave"}, Actions: []string{"read"}, Streams: []string{"trades"}})
	srv := startServer(t, cfg)
	host := srv.Addr().String()
	ctx := context.Background()

	pub, err := wire.Publish(ctx, "ws://alice:"+url.PathEscape(alicePW)+"@"+host+"/trades", wire.PublishOptions{})
	if err != nil {
		t.Fatalf("publish with credentials in the URL: %v", err)
	}
	if _, err := pub.Send(ctx, json.RawMessage(trade(1))); err != nil {
		t.Fatal(err)
	}
	pub.Close()

	sub, err := wire.Subscribe(ctx, "ws://"+url.UserPassword("dave", oddPW).String()+"@"+host+"/trades", wire.SubscribeOptions{Offset: wire.At(0)})
	if err != nil {
		t.Fatalf("subscribe with a percent-encoded password: %v", err)
	}
	sub.Close()
	sub, err = wire.Subscribe(ctx, "ws://"+host+"/trades", wire.SubscribeOptions{DialOptions: wire.DialOptions{Credentials: url.UserPassword("dave", oddPW)}})
	if err != nil {
		t.Fatalf("subscribe with DialOptions.Credentials: %v", err)
	}
	sub.Close()

	for _, c := range []struct {
		url, want string
		status    int
	}{
		{"ws://" + host + "/trades", "requires a user name and password", 401},
		{"ws://alice:" + wrongPW + "@" + host + "/trades", `refused the credentials of user "alice"`, 401},
		{"ws://bob:" + bobPW + "@" + host + "/trades", `user "bob" may not read stream "trades" (HTTP 403)`, 403},
		{"ws://bob:" + bobPW + "@" + host + "/live?publish", `user "bob" may not publish to stream "live" (HTTP 403)`, 403},
	} {
		_, err := wire.Subscribe(ctx, c.url, wire.SubscribeOptions{})
		if strings.Contains(c.url, "publish") {
			_, err = wire.Publish(ctx, strings.TrimSuffix(c.url, "?publish"), wire.PublishOptions{})
		}
		var ad *wire.AccessDenied
		if !errorsAs(err, &ad) || ad.Status != c.status || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want HTTP %d saying %q", c.url, err, c.status, c.want)
			continue
		}
		for _, pw := range []string{alicePW, bobPW, wrongPW} {
			if strings.Contains(err.Error(), pw) {
				t.Errorf("the error names a password: %v", err)
			}
		}
	}
}

func errorsAs(err error, target **wire.AccessDenied) bool {
	if err == nil {
		return false
	}
	ad, ok := err.(*wire.AccessDenied)
	*target = ad
	return ok
}

// TestFailingLoginIsSlowedAndLoggedOnce: past its free failures a user
// name tried from one address gets 429 without a check, except for a pair
// verified recently, while another user behind the same address is
// checked as usual; the failures are logged once per interval, and the log
// never holds a password.
func TestFailingLoginIsSlowedAndLoggedOnce(t *testing.T) {
	clock := &manualClock{t: time.Now()}
	logs := &testkit.SyncBuffer{}
	cfg := authConfig(t)
	cfg.Streams = cfg.Streams[1:] // live and raw: nothing stamped by the clock is kept
	srv := startServer(t, cfg, Options{Logger: log.New(logs), Clock: clock.Now})
	addr := srv.Addr().String()

	status := func(user, pw string) (int, string) {
		resp, _ := rawRequest(t, addr, "/live", basic(user, pw), true)
		return resp.StatusCode, resp.Header.Get("Retry-After")
	}
	if s, _ := status("bob", bobPW); s != 101 {
		t.Fatalf("bob: HTTP %d", s)
	}
	for i := 1; i <= 4; i++ { // 3 free failures, then a 250 ms backoff
		if s, _ := status("bob", wrongPW); s != 401 {
			t.Fatalf("wrong password %d: HTTP %d, want 401", i, s)
		}
	}
	if s, ra := status("bob", wrongPW+"2"); s != 429 || ra != "1" {
		t.Fatalf("bob's next guess during the backoff: HTTP %d, Retry-After %q; want 429 and 1", s, ra)
	}
	if s, _ := status("carol", carolPW); s != 403 { // carol may not read live: checked, then refused
		t.Fatalf("carol (right password) from the address where bob fails: HTTP %d, want 403 (checked, not held back by bob's backoff)", s)
	}
	if s, _ := status("bob", bobPW); s != 101 {
		t.Fatalf("bob (verified before) during his backoff: HTTP %d, want 101", s)
	}
	clock.Add(250 * time.Millisecond)
	if s, _ := status("bob", bobPW+"x"); s != 401 {
		t.Fatalf("bob after the backoff: HTTP %d, want 401 (checked again)", s)
	}
	if got := srv.AuthFailures(); got != 5 {
		t.Errorf("AuthFailures = %d, want 5", got)
	}
	if n := strings.Count(logs.String(), "authentication failed"); n != 1 {
		t.Errorf("5 failures of one login within a minute gave %d log lines, want 1:\n%s", n, logs)
	}
	if !strings.Contains(logs.String(), "user=bob") || !strings.Contains(logs.String(), "remote=127.0.0.1") {
		t.Errorf("the line does not name the user and the address:\n%s", logs)
	}
	// An unknown user's name is not logged: it may be a password typed in
	// the wrong field.
	clock.Add(time.Minute)
	_, _ = status("zz-"+wrongPW, wrongPW)
	checkNoSecrets(t, logs.String())
}

// manualClock is a clock the test moves.
type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *manualClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// checkNoSecrets fails when a log holds a test password in any form a
// client sends it, or an Authorization header.
func checkNoSecrets(t *testing.T, logs string) {
	t.Helper()
	for _, pw := range []string{alicePW, bobPW, carolPW, wrongPW} {
		for _, form := range []string{pw, url.QueryEscape(pw), base64.StdEncoding.EncodeToString([]byte("alice:" + pw)), base64.StdEncoding.EncodeToString([]byte("bob:" + pw))} {
			if strings.Contains(logs, form) {
				t.Errorf("the log holds %q", form)
			}
		}
	}
	if strings.Contains(logs, "Basic ") || strings.Contains(logs, "Authorization") {
		t.Errorf("the log holds an Authorization header:\n%s", logs)
	}
	if strings.Contains(logs, "$2a$") {
		t.Errorf("the log holds a password hash")
	}
}

// TestReloadChangesGrantsForNewConnectionsOnly: SIGHUP's Reload puts a
// new auth: section in force for new connections; a connection open
// before keeps what it was admitted to.
func TestReloadChangesGrantsForNewConnectionsOnly(t *testing.T) {
	logs := &testkit.SyncBuffer{}
	cfg := authConfig(t)
	srv := startServer(t, cfg, Options{Logger: log.New(logs)})
	host := srv.Addr().String()
	ctx := context.Background()
	aliceURL := "ws://alice:" + alicePW + "@" + host + "/trades"

	old, err := wire.Subscribe(ctx, aliceURL, wire.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()

	// alice loses trades; carol may publish to it.
	next := authConfig(t)
	next.Auth.Grants[0] = config.Grant{Principals: []string{"carol"}, Actions: []string{"publish"}, Streams: []string{"trades"}}
	if err := srv.Reload(next); err != nil {
		t.Fatal(err)
	}
	if _, err := wire.Subscribe(ctx, aliceURL, wire.SubscribeOptions{}); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("alice after the reload: %v, want 403", err)
	}
	pub, err := wire.Publish(ctx, "ws://carol:"+carolPW+"@"+host+"/trades", wire.PublishOptions{})
	if err != nil {
		t.Fatalf("carol after the reload: %v", err)
	}
	defer pub.Close()
	if _, err := pub.Send(ctx, json.RawMessage(trade(7))); err != nil {
		t.Fatal(err)
	}
	// The subscription alice opened before still gets the row.
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := old.Recv(rctx); err != nil {
		t.Fatalf("alice's subscription from before the reload: %v", err)
	}
	if !strings.Contains(logs.String(), "auth: reloaded") {
		t.Errorf("the reload is not logged:\n%s", logs)
	}
	// Removing auth: opens the server again.
	if err := srv.Reload(testConfig(t)); err != nil {
		t.Fatal(err)
	}
	if resp, _ := rawRequest(t, host, "/trades", "", true); resp.StatusCode != 101 {
		t.Fatalf("after auth: was removed: HTTP %d, want 101", resp.StatusCode)
	}
	checkNoSecrets(t, logs.String())
}

// TestServingOffLoopbackWithoutAuthWarns: one warning at start when the
// server listens beyond loopback with no auth: section, none otherwise.
func TestServingOffLoopbackWithoutAuthWarns(t *testing.T) {
	for _, c := range []struct {
		listen string
		auth   bool
		warn   bool
	}{
		{"127.0.0.1:0", false, false},
		{"0.0.0.0:0", false, true},
		{"0.0.0.0:0", true, false},
	} {
		logs := &testkit.SyncBuffer{}
		cfg := testConfig(t)
		if c.auth {
			cfg = authConfig(t)
		}
		cfg.Listen = c.listen
		srv := startServer(t, cfg, Options{Logger: log.New(logs)})
		_ = srv.Close()
		if got := strings.Count(logs.String(), "serving without authentication"); got != map[bool]int{false: 0, true: 1}[c.warn] {
			t.Errorf("listen %s, auth %v: %d warnings, want warn=%v:\n%s", c.listen, c.auth, got, c.warn, logs)
		}
	}
}
