package broker

import (
	"net/http"
	"testing"

	"github.com/streamcast/streamcast/pkg/broker/control"
)

// TestCORSPreflightsAreAnsweredForAdmittedOriginsOnly: a browser's
// preflight before a POST or an event stream is answered 204 with the
// CORS headers for an origin allowed_origins admits, without credentials
// (a preflight never carries them), 403 for one it does not, and is not
// taken for a stream's on the control API's paths.
func TestCORSPreflightsAreAnsweredForAdmittedOriginsOnly(t *testing.T) {
	cfg := testConfig(t)
	cfg.AllowedOrigins = []string{"https://app.example"}
	srv := startServer(t, cfg)
	for _, tc := range []struct {
		path, origin, method string
		status               int
		allowOrigin          string
	}{
		{"/trades", "https://app.example", "POST", 204, "https://app.example"},
		{"/trades", "https://app.example", "GET", 204, "https://app.example"},
		{"/nosuch", "https://app.example", "POST", 204, "https://app.example"}, // says nothing of which streams exist
		{"/trades", "https://elsewhere.example", "POST", 403, ""},
		{"/trades", "https://app.example", "DELETE", 0, ""},
		{control.Prefix + "/streams", "https://app.example", "POST", 0, ""},
	} {
		req, _ := http.NewRequest(http.MethodOptions, "http://"+srv.Addr().String()+tc.path, nil)
		req.Header.Set("Origin", tc.origin)
		req.Header.Set("Access-Control-Request-Method", tc.method)
		req.Header.Set("Access-Control-Request-Headers", "authorization, content-type")
		res, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		got := res.Header.Get("Access-Control-Allow-Origin")
		if tc.status == 0 {
			if res.StatusCode == 204 || got != "" {
				t.Errorf("OPTIONS %s asking %s from %s: %d, Access-Control-Allow-Origin %q; want no preflight answer", tc.path, tc.method, tc.origin, res.StatusCode, got)
			}
			continue
		}
		if res.StatusCode != tc.status || got != tc.allowOrigin {
			t.Errorf("OPTIONS %s asking %s from %s: %d, Access-Control-Allow-Origin %q; want %d, %q", tc.path, tc.method, tc.origin, res.StatusCode, got, tc.status, tc.allowOrigin)
		}
		if tc.status == 204 && res.Header.Get("Access-Control-Allow-Headers") == "" {
			t.Errorf("OPTIONS %s: no Access-Control-Allow-Headers", tc.path)
		}
	}
}
