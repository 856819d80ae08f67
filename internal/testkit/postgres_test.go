package testkit

import (
	"net"
	"os"
	"strconv"
	"testing"
)

// TestStartServesAndStopRemovesEverything starts a server, checks it takes
// TCP connections on its port, and after its cleanup checks the port is
// closed and the directory gone.
func TestStartServesAndStopRemovesEverything(t *testing.T) {
	var s *Postgres
	t.Run("server", func(t *testing.T) {
		s = StartPostgres(t)
		c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(s.Port))
		if err != nil {
			t.Fatalf("dial the server: %v\n%s", err, s.Log())
		}
		c.Close()
		dsn := s.CreateDB(t, "second")
		if want := "postgres://postgres@127.0.0.1:" + strconv.Itoa(s.Port) + "/second?sslmode=disable"; dsn != want {
			t.Fatalf("CreateDB returned %q, want %q", dsn, want)
		}
		if a, b := s.NewDB(t), s.NewDB(t); a == b {
			t.Fatalf("NewDB returned %q twice", a)
		}
	})
	if s == nil {
		return // skipped: no binaries
	}
	if _, err := os.Stat(s.Dir); !os.IsNotExist(err) {
		t.Errorf("after cleanup %s still exists (stat: %v)", s.Dir, err)
	}
	if c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(s.Port)); err == nil {
		c.Close()
		t.Errorf("after cleanup port %d still accepts connections", s.Port)
	}
}
