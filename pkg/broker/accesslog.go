package broker

import (
	"math"
	"time"

	"github.com/gorilla/websocket"
)

// Roles of a connection in the access log: what the request asked to be.
const (
	roleSubscriber = "subscriber"
	rolePublisher  = "publisher"
)

// logAccess writes c's line of the access log (log.access: true), once
// the connection has ended: the remote address, the user it was admitted
// as ("" when the server has no auth: section), the stream it asked for,
// its role, the close code (the server's, or the peer's when the peer
// closed first; 1006 when the socket ended without one), the rows (a
// subscriber: data frames written to it; a publisher: rows committed
// from it) and how long it lasted. Figures are numbers, so a JSON log
// carries them as numbers.
func (s *Server) logAccess(c *wsConn, user, stream string, publish bool) {
	if !s.accessLog.Load() {
		return
	}
	role := roleSubscriber
	if publish {
		role = rolePublisher
	}
	c.mu.Lock()
	code, byPeer := c.closeCode, c.closedByPeer
	c.mu.Unlock()
	by := "server"
	switch {
	case code == 0:
		code, by = websocket.CloseAbnormalClosure, "none"
	case byPeer:
		by = "client"
	}
	took := math.Round(time.Since(c.began).Seconds()*1e3) / 1e3
	s.logger.Info("connection closed", "remote", c.nc.RemoteAddr().String(), "user", user, "stream", stream,
		"role", role, "code", code, "closed_by", by, "rows", c.rows.Load(), "duration_s", took)
}
