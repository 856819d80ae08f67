package brokertest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/streamcast/streamcast/pkg/broker"
	"github.com/streamcast/streamcast/pkg/meta/config"
)

// Start runs a broker with cfg until the test ends and returns its ws://
// base URL. It fails the test when the server is not ready within 20 s, and
// when Run ends with an error at cleanup.
func Start(t testing.TB, cfg config.Config) string {
	t.Helper()
	url, _ := Run(t, cfg)
	return url
}

// Run is Start for a test that also stops the broker itself (to restart it
// on the same address and root, say): stop closes the server and waits for
// Run to end; it runs at cleanup too, and only once.
func Run(t testing.TB, cfg config.Config) (url string, stop func()) {
	t.Helper()
	srv, stop := Serve(t, cfg, broker.Options{})
	return "ws://" + srv.Addr().String(), stop
}

// Serve is Run with the server's options, for tests that set its hooks, and
// it returns the server itself.
func Serve(t testing.TB, cfg config.Config, opts broker.Options) (srv *broker.Server, stop func()) {
	t.Helper()
	srv, err := broker.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Run(context.Background()) }()
	select {
	case <-srv.Ready():
	case err := <-errc:
		t.Fatal(err)
	case <-time.After(20 * time.Second):
		t.Fatal("server not ready after 20s")
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = srv.Close()
			if err := <-errc; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return srv, stop
}
