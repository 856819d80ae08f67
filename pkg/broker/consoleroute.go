package broker

import (
	"net/http"
	"slices"
	"strings"

	"github.com/streamcast/streamcast/pkg/broker/auth"
	"github.com/streamcast/streamcast/pkg/broker/console"
	"github.com/streamcast/streamcast/pkg/meta/config"
)

// This file hooks the web console (package console) into the routes. Only
// plain HTTP GETs reach it: a WebSocket upgrade on any path, / included,
// is a stream's (entry.go), so the console's paths never hide a stream.

// consolePath is where the console's page is served: / unless a stream
// has the empty name (its URL is /), then /ui. /ui serves the page either
// way, so a bookmark of it always works.
func (s *Server) consolePath() string {
	if slices.Contains(s.reg.Names(), "") {
		return "/ui"
	}
	return "/"
}

// consoleFile maps a request path to the console file it asks for.
func (s *Server) consoleFile(path string) (string, bool) {
	switch {
	case path == "/ui" || path == s.consolePath():
		return console.Page, true
	case path == "/"+console.Module:
		return console.Module, true
	case strings.HasPrefix(path, "/") && path != "/"+console.Page && strings.Count(path, "/") == 1 && console.Has(path[1:]):
		return path[1:], true
	}
	return "", false
}

// serveConsole answers a GET of a console file. The page itself asks a
// visitor without credentials to log in (401 with the Basic challenge, so
// the browser shows its prompt) when anonymous users may neither read nor
// see the stats of any stream: the page could show them nothing. The
// scripts and the stylesheet are served to anyone; they hold no data, and
// what the page then fetches goes through the same grants as any client.
func (s *Server) serveConsole(w http.ResponseWriter, r *http.Request, name string) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, r.URL.Path+" takes GET", http.StatusMethodNotAllowed)
		return
	}
	if name == console.Page {
		a := auth.AccessOf(r)
		if a.Policy != nil && a.Who == auth.Anonymous &&
			!a.Policy.AllowsAny(a.Who, config.ActionStats) && !a.Policy.AllowsAny(a.Who, config.ActionRead) {
			s.gate.Refuse(w, a, "open the web console")
			return
		}
	}
	console.ServeWithStats(w, r, name, s.cfg.Stats.Path())
}
