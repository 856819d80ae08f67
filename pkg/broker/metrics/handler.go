package metrics

import (
	"io"
	stdlog "log"
	"net/http"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler serves a scrape in the Prometheus text format from a registry
// of its own (never Prometheus's global one, so a process may run several
// servers): a Collector over sample, and the Go runtime's and the
// process's collectors. A metric that fails to gather is left out of the
// answer, not logged.
func Handler(sample func() Sample) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		NewCollector(sample),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:      stdlog.New(io.Discard, "", 0),
		ErrorHandling: promhttp.ContinueOnError,
	})
}

// AuthFailures counts the requests refused before the upgrade, for
// streamcast_auth_failures_total (Sample.Unauthenticated, Sample.Forbidden,
// Sample.Backoff, Sample.Busy). The zero value is ready; it is safe from
// any goroutine.
type AuthFailures struct {
	unauthenticated, forbidden, backoff, busy atomic.Int64
}

// Record counts a refusal with status 401 (no or bad credentials), 403
// (no grant), 429 (a login serving its backoff) or 503 (the server checks
// as many logins as it allows); other statuses are not counted.
func (a *AuthFailures) Record(status int) {
	switch status {
	case http.StatusUnauthorized:
		a.unauthenticated.Add(1)
	case http.StatusForbidden:
		a.forbidden.Add(1)
	case http.StatusTooManyRequests:
		a.backoff.Add(1)
	case http.StatusServiceUnavailable:
		a.busy.Add(1)
	}
}

// Load returns the counts of 401s and of 403s.
func (a *AuthFailures) Load() (unauthenticated, forbidden int64) {
	return a.unauthenticated.Load(), a.forbidden.Load()
}

// LoadThrottled returns the counts of 429s and of 503s.
func (a *AuthFailures) LoadThrottled() (backoff, busy int64) {
	return a.backoff.Load(), a.busy.Load()
}
