package cmd

import (
	"fmt"
	"strings"

	"github.com/streamcast/streamcast/pkg/meta"
	"github.com/streamcast/streamcast/pkg/meta/config"
)

// checkScheme refuses a server URL that lacks ws:// or wss:// (http:// and
// https:// stand for them), showing the URL as it should have been written.
// Without a scheme, "localhost:8765/demo" would parse as the scheme
// "localhost" and fail with words about schemes the user never wrote.
// The URL is shown without its user info: that may hold a password.
func checkScheme(raw string) error {
	scheme, rest, found := strings.Cut(raw, "://")
	if found {
		switch strings.ToLower(scheme) {
		case "ws", "wss", "http", "https":
			return nil
		}
	} else {
		rest = raw
	}
	if i := strings.LastIndex(rest, "@"); i >= 0 && !strings.Contains(rest[:i], "/") {
		rest = "USER:PASSWORD@" + rest[i+1:]
	}
	switch {
	case found:
		return fmt.Errorf("the URL %s://%s is not a WebSocket URL: give ws://%s (or wss:// for a server with TLS)", scheme, rest, rest)
	case !strings.ContainsAny(rest, ":/") && meta.CheckName(rest) == nil:
		return fmt.Errorf("%q is a stream name, not its URL: give ws://%s/%s, with the address the server listens on (wss:// for a server with TLS)", rest, config.DefaultListen, rest)
	}
	return fmt.Errorf("the URL %s needs ws:// (or wss:// for a server with TLS): give ws://%s", rest, rest)
}
