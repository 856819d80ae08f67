package console

import (
	"bytes"
	"embed"
	"html"
	"io/fs"
	"net/http"
	"path"
	"time"
)

//go:embed assets
var assets embed.FS

// Page is the console's HTML page, served at / (or /ui).
const Page = "index.html"

// Module is the browser client module's file, served at /streamcast.js
// to the console and to any web application that imports it.
const Module = "streamcast.js"

// Has reports whether name is one of the console's files.
func Has(name string) bool {
	_, err := fs.Stat(assets, path.Join("assets", name))
	return err == nil && name != "" && path.Clean(name) == name
}

// Serve answers r with the console file named name (Page, Module, or an
// asset the page loads), or 404 when there is none. Files are revalidated
// on every load (Cache-Control: no-cache) so a page never mixes versions
// after an upgrade. The module may be imported from any origin: it is
// public code that holds no data.
func Serve(w http.ResponseWriter, r *http.Request, name string) {
	ServeWithStats(w, r, name, "/stats")
}

// statsMeta is the page's meta element that tells its script where the
// server serves its stats.
const statsMeta = `<meta name="streamcast-stats" content="/stats">`

// ServeWithStats is Serve for a server that serves its stats at
// statsPath (config stats:), "" when it serves none: the page is told
// where to read them.
func ServeWithStats(w http.ResponseWriter, r *http.Request, name, statsPath string) {
	if !Has(name) {
		http.NotFound(w, r)
		return
	}
	b, err := assets.ReadFile(path.Join("assets", name))
	if err != nil {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	if name == Module {
		h.Set("Access-Control-Allow-Origin", "*")
	}
	if name == Page && statsPath != "/stats" {
		b = bytes.Replace(b, []byte(statsMeta), []byte(`<meta name="streamcast-stats" content="`+html.EscapeString(statsPath)+`">`), 1)
	}
	if name == Page {
		// The page runs only its own scripts and talks only to its own
		// origin: a stream's row rendered as text can never become code.
		h.Set("Content-Security-Policy", "default-src 'self'; connect-src 'self' ws: wss:; img-src 'self' data:; style-src 'self'; frame-ancestors 'none'")
	}
	// ServeContent sets Content-Type from the name's extension (.js as
	// text/javascript, which module scripts require) and answers HEAD
	// and Range requests.
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(b))
}
