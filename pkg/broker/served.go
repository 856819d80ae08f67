package broker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/streamcast/streamcast/pkg/broker/control"
)

// ServedStream is one stream of `streamcast streams list` for a server
// without a control API, in the shape the API lists a stream of the
// config file: every stream such a server serves comes from its file.
type ServedStream struct {
	Name     string         `json:"name"`
	Source   string         `json:"source"`  // control.SourceConfig
	Desired  string         `json:"desired"` // control.Serving
	Revision *int64         `json:"revision"`
	StreamID *string        `json:"stream_id"` // nil: /stats does not carry it (describe NAME does)
	Observed ServedObserved `json:"observed"`
}

// ServedObserved is what /stats tells of a stream's state: it lists only
// the streams the server serves now.
type ServedObserved struct {
	State string `json:"state"`
}

// ListServed lists the streams the server at base serves, from its /stats
// document at statsPath (the config's stats:; "" when it serves none),
// for a server that has no control API. user, when set, is sent with
// HTTP Basic: a server with an auth: section lists only the streams the
// user holds the stats grant on, as the control API lists only those its
// user may control.
func ListServed(ctx context.Context, client *http.Client, base, statsPath string, user *url.Userinfo) ([]ServedStream, error) {
	if statsPath == "" {
		return nil, fmt.Errorf("the server at %s has no control API (its config has no control: section) and serves no /stats (stats: false), so nothing lists its streams: "+
			"add a control: section (and run streamcast control init), or set stats: to a path", base)
	}
	st, err := ReadStats(ctx, client, base, statsPath, user)
	var refused *StatsRefused
	switch {
	case errors.As(err, &refused):
		return nil, fmt.Errorf("the server at %s has no control API (its config has no control: section), and it refused %s, where its streams are listed: %s; "+
			"give a user that holds the stats grant (STREAMCAST_USER and STREAMCAST_PASSWORD, or in --server's URL)", base, statsPath, refused.Status)
	case err != nil:
		return nil, fmt.Errorf("the server at %s has no control API (its config has no control: section); list its streams from %s: %w", base, statsPath, err)
	}
	out := make([]ServedStream, 0, len(st.Streams))
	for _, ss := range st.Streams {
		out = append(out, ServedStream{Name: ss.Name, Source: control.SourceConfig, Desired: control.Serving,
			Observed: ServedObserved{State: control.ObservedServing}})
	}
	// The control API lists in name order; so does this list.
	slices.SortFunc(out, func(a, b ServedStream) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
