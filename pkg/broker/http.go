package broker

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/gorilla/websocket"

	"github.com/streamcast/streamcast/pkg/broker/auth"
	"github.com/streamcast/streamcast/pkg/meta/config"
	"github.com/streamcast/streamcast/pkg/schema"
	"github.com/streamcast/streamcast/pkg/wire"
)

// ServeHTTP serves a request through the server's middleware chain and
// routes: WebSocket upgrades on /<stream>, and GET /stats, GET /health and
// (unless metrics.enabled is false) GET /metrics.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.chain.ServeHTTP(w, r)
}

// serveStream serves a WebSocket upgrade on /<stream>.
func (s *Server) serveStream(w http.ResponseWriter, r *http.Request) {
	if s.state.Load() != stateReady || !s.track() {
		http.Error(w, "streamcast is starting or stopping; retry shortly", http.StatusServiceUnavailable)
		return
	}
	// The one parser of the protocol's query, shared with the client.
	q, qerr := wire.ParseRequest(r.URL.Path, r.URL.RawQuery)
	st := s.reg.Get(q.Stream)
	up := &s.subUp
	if qerr == nil && q.Publish && st != nil {
		up = &s.pubUp
	}
	hj := &peerHijack{ResponseWriter: w}
	var z deflateOffer
	if s.cfg.Compression {
		if z = negotiateDeflate(r.Header, up == &s.pubUp); z.Mode != deflateOff {
			zu := *up
			zu.EnableCompression = true
			up, hj.DeflateLine = &zu, z.Line
		}
	}
	ws, err := up.Upgrade(hj, r, s.relayChain(st))
	if err != nil {
		s.untrack()
		return // gorilla answered with an HTTP error
	}
	if z.Mode != deflateOff && !hj.Scan.deflated {
		z.Mode = deflatePlain // gorilla's own line went out: no server context takeover
	}
	// Serve the connection on a goroutine of its own and return: net/http's
	// goroutine would otherwise keep its request buffers (about 10 KiB)
	// alive for the life of every idle subscriber.
	acc := auth.AccessOf(r)
	go func() {
		defer s.untrack()
		c := newConn(s, ws, hj.Raw, &hj.Scan.Frames, st)
		c.deflate = z.Mode
		s.serveConn(c, st, q, qerr, acc)
	}()
}

// relayChain is the wire.RelayChainHeader of an answer for st (nil when
// there is no st): st on this server, then, when st relays another, the
// chain its upstream gave.
func (s *Server) relayChain(st *stream) http.Header {
	if st == nil {
		return nil
	}
	chain := s.id + "/" + st.name
	if st.relay != nil {
		up := st.relay.Chain()
		chain = strings.Join(append([]string{chain}, up[:min(len(up), wire.MaxRelayChain-1)]...), ",")
	}
	return http.Header{wire.RelayChainHeader: {chain}}
}

// serveConn serves one connection, upgraded or an event stream, until it
// ends. acc is who the connection was admitted as: it keeps that access
// for its life, whatever a reload changes.
func (s *Server) serveConn(c *wsConn, st *stream, q wire.Request, qerr error, acc auth.Access) {
	// Deferred first, so it runs last: once the connection has ended.
	defer s.logAccess(c, acc.Who, q.Stream, q.Publish)
	// What the connection reads of st while it sets up (its schema,
	// metadata and log) stays put until release: a migration swaps them
	// only once no connection holds them (stream.hold).
	release := func() {}
	if st != nil {
		release = st.hold()
	}
	isPub := qerr == nil && st != nil && q.Publish && (q.Publisher == "" || st.cfg.ExactlyOnce) && st.retirement() == nil && st.relay == nil
	// Compile the filter before the connection is registered: keepalive
	// only sees registered connections, so however long a compile takes,
	// it cannot make this peer look silent (a long compile once ended in
	// 1006 without a close frame), and the greeting or the refusal follows.
	var filter *schema.Filter // held on s.filters until subscribe takes it
	var echo []byte
	if qerr == nil && st != nil && !q.Publish && q.Where != nil {
		filter, echo, qerr = s.compileWhere(st, q.Where)
	}
	defer func() { s.filters.releaseFilter(filter) }()
	if isPub {
		newPublisher(c, st, q.Publisher) // before register: keepalive may start the writer
	}
	if !s.register(c) {
		release()
		c.close(websocket.CloseGoingAway, wire.GoingAwayReason(wire.WhyServerStopping))
		c.finish()
		return
	}
	defer s.unregister(c)
	if st != nil && !st.life.Register(c) {
		// The stream left the registry between the lookup and now: it is
		// stopping, and serves no new connection.
		st, isPub = nil, false
	} else if st != nil {
		defer st.life.Unregister(c)
	}

	var sub *subscriber
	var full *FilterMemoryFull
	switch {
	case errors.As(qerr, &full):
		c.refuse(full)
	case qerr != nil:
		var br *wire.BadRequest
		if !errors.As(qerr, &br) {
			br = &wire.BadRequest{Detail: qerr.Error()}
		}
		c.refuse(br)
	case st == nil && (s.isHeld(q.Stream) || s.reg.Get(q.Stream) != nil) && acc.Allows(config.ActionRead, q.Stream):
		// Between the stop and the start of a retirement: the stream is
		// back in a moment, so a terminal 4404 would be wrong. It may be
		// back already: the lookup found nothing, then the start served
		// it again and let the hold go before this check.
		c.close(websocket.CloseGoingAway, wire.GoingAwayReason(wire.WhyStreamRetiring))
	case st == nil:
		// Only the streams this principal may read: the list must not
		// tell anyone what else the server holds.
		c.refuse(&wire.StreamNotFound{Serves: acc.Filter(config.ActionRead, s.reg.Names())})
	case q.Publish && st.relay != nil:
		c.refuse(&wire.RelayOnly{Upstream: st.relay.URL()})
	case q.Publish && st.retirement() != nil:
		// A retired stream takes no rows, whatever its log would accept
		// (its retirement may have been recovered by adoption).
		r := st.retirement()
		c.refuse(&wire.StreamRetired{At: r.At, EndOffset: r.EndOffset})
	case q.Publisher != "" && !st.cfg.ExactlyOnce:
		c.refuse(&wire.ExactlyOnceUnavailable{Why: "stream"})
	case isPub:
		// A publisher is fenced, not waited for, by a migration
		// (attached.AddReader).
		release()
		s.publish(c.pub)
	default:
		req := replayRequest{Given: q.Offset != wire.Null, Offset: q.Offset}
		sub = s.subscribe(c, st, req, filter, echo, release)
		release = func() {} // subscribe's now
		filter = nil        // so is the hold on the filter
	}
	release()
	c.readLoop()
	if sub != nil {
		st.detach(sub)
	}
	c.finish()
}

// compileWhere compiles a subscriber's where= against st's schema, refusing
// one longer than limits.max_where_bytes: the bound keeps what one
// subscriber's filter costs to compile, to hold and to evaluate per row
// under the fan-out lock small beside the publisher's own work (I5). The
// compiled form comes from the server's filterCache, shared with the
// subscribers that sent the same filter and counted against
// limits.max_filter_bytes; a filter that would pass that bound is a
// *FilterMemoryFull. It returns the filter, held until released (nil when
// it restricts nothing), and its echo for the greeting.
func (s *Server) compileWhere(st *stream, where []byte) (*schema.Filter, []byte, error) {
	if max := st.limits.MaxWhereBytes; max > 0 && len(where) > max {
		return nil, nil, &wire.BadRequest{Detail: fmt.Sprintf("where= is %d bytes, over limits.max_where_bytes %d; send a shorter one", len(where), max)}
	}
	f, err := s.filters.acquire(st.sch, where)
	var full *FilterMemoryFull
	switch {
	case errors.As(err, &full):
		return nil, nil, err
	case err != nil:
		return nil, nil, &wire.BadRequest{Detail: err.Error()}
	case f == nil:
		return nil, []byte("{}"), nil
	}
	return f, f.JSON(), nil
}

// refuse closes c with a refusal's code and reason (instead of a greeting).
func (c *wsConn) refuse(r wire.Refusal) {
	c.close(r.Code(), r.Reason())
}

// serveHTTP answers plain HTTP requests.
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	if ctl := s.control.Load(); ctl != nil && isControlPath(path) {
		ctl.ServeHTTP(w, r)
		return
	}
	if path == "/metrics" && s.metrics == nil {
		path = "" // metrics.enabled: false
	}
	// stats: moves the figures or turns them off; the path, checked
	// against serve's other routes when the config was validated, wins
	// over a console file of the same name.
	stats := s.cfg.Stats.Path()
	if stats != "" && path == stats {
		path = statsRoute
	} else if path == statsRoute {
		path = ""
	}
	if name, ok := s.consoleFile(path); ok {
		s.serveConsole(w, r, name)
		return
	}
	switch path {
	case statsRoute, "/health", "/metrics":
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, r.URL.Path+" takes GET", http.StatusMethodNotAllowed)
			return
		}
		switch path {
		case statsRoute:
			s.serveStats(w, r)
		case "/metrics":
			s.serveMetrics(w, r)
		default:
			s.serveHealth(w)
		}
	default:
		if isHTTPPublish(r) {
			s.servePublishHTTP(w, r)
			return
		}
		if wantsEvents(r) {
			s.serveEvents(w, r)
			return
		}
		var routes []string
		if stats != "" {
			routes = append(routes, stats)
		}
		routes = append(routes, "/health")
		if s.metrics != nil {
			routes = append(routes, "/metrics")
		}
		also := "GET " + routes[0]
		if n := len(routes); n > 1 {
			also = "GET " + strings.Join(routes[:n-1], ", ") + " and " + routes[n-1]
		}
		names := auth.AccessOf(r).Filter(config.ActionRead, s.reg.Names())
		http.Error(w, "streamcast serves streams over WebSocket at /<stream> (e.g. wscat -c ws://host/"+firstName(names)+") and as Server-Sent Events (curl -N http://host/"+firstName(names)+"), "+also+", and its web console at "+s.consolePath(), http.StatusNotFound)
	}
}

// statsRoute is the route the stats: path is served at, whatever it
// is: a request path that cannot be a URL's, so no request reaches it
// but through stats:.
const statsRoute = "\x00stats"

func firstName(names []string) string {
	if len(names) == 0 {
		return "stream"
	}
	return names[0]
}
