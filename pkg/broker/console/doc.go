// Package console holds the web console streamcast serve shows at / and
// the browser client module it serves at /streamcast.js: plain HTML, CSS
// and JavaScript embedded in the binary, with no build step and nothing
// fetched from elsewhere, so the page works offline.
//
// The page reads only what any client may: /stats (filtered by the
// server to the streams its user holds stats on) and the streams
// themselves over the WebSocket protocol (docs/design.md §6), through
// streamcast.js. It never gets a route of its own into the server's
// state, so it can show nothing the user's grants would not (the server's
// entry middleware checks them, §3.3). This package serves files; it
// must never decide who may see them. It is its own package because the
// page and its module are a client of the server, not a part of it: they
// import nothing of the module, and their browser tests run apart.
package console
