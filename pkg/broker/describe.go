package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/streamcast/streamcast/pkg/meta"
	"github.com/streamcast/streamcast/pkg/meta/config"
)

// ReadStats fetches the /stats document of the server at base (http or
// https://host:port), served at path (the config's stats:), with client,
// sending user (HTTP Basic) when it is set.
func ReadStats(ctx context.Context, client *http.Client, base, path string, user *url.Userinfo) (Stats, error) {
	var st Stats
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		return st, err
	}
	if user != nil {
		pw, _ := user.Password()
		req.SetBasicAuth(user.Username(), pw)
	}
	resp, err := client.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, &StatsRefused{Status: resp.Status}
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return st, fmt.Errorf("read %s%s: %w", base, path, err)
	}
	return st, nil
}

// StatsRefused is ReadStats's error when the server answered with another
// status than 200 (401 or 403 without a grant of stats).
type StatsRefused struct{ Status string }

func (e *StatsRefused) Error() string { return "the server answered " + e.Status }

// Find returns the stats of the stream named name, and whether the
// server serves it.
func (s Stats) Find(name string) (StreamStats, bool) {
	for _, ss := range s.Streams {
		if ss.Name == name {
			return ss, true
		}
	}
	return StreamStats{}, false
}

// Describe fills d's figures that move from ss, the server's /stats of
// the stream: end offset, publish and replication lag, connections and
// exactly-once publishers. d.Source becomes meta.SourceServer.
func (ss StreamStats) Describe(d *meta.Description) {
	d.Source = meta.SourceServer
	if ss.EndOffset != nil {
		d.SetEnd(*ss.EndOffset)
	}
	if d.Published != nil {
		d.Published.PublishedThrough, d.Published.LagRows, d.Published.LagS = ss.PublishedThrough, ss.PublishLagRows, ss.PublishLagS
	}
	if ss.ReplicatedThrough != nil {
		d.Replication.Enabled = true
	}
	d.Replication.ReplicatedThrough, d.Replication.LagRows, d.Replication.LagS = ss.ReplicatedThrough, ss.ReplicationLagRows, ss.ReplicationLagS
	d.Connections = &meta.DescribedConnections{Subscribers: ss.Subscribers, Publishers: ss.Publishers}
	if ss.ExactlyOnce != nil {
		d.Publishers = d.Publishers[:0]
		for _, p := range ss.ExactlyOnce {
			d.Publishers = append(d.Publishers, meta.DescribedPublisher{ID: p.ID, LastSeq: p.LastSeq, LastOffset: p.LastOffset, Connected: &p.Connected})
		}
	}
}

// DescribeOptions say where DescribeStream looks.
type DescribeOptions struct {
	// Config is the configuration: its root and published prefix locate
	// the metadata and logs, its streams say what is declared.
	Config config.Config
	// Server is the base URL (http or https://host:port) of the server
	// to ask for the figures that move; "" asks none. It answers them at
	// Config.Stats's path.
	Server string
	// Client fetches Server's /stats; User, when set, is sent with it.
	Client *http.Client
	User   *url.Userinfo
	// NoServer says why no server is asked, when Server is "".
	NoServer string
	// Now is the clock the replication lag is measured against.
	Now time.Time
}

// DescribeStream describes the stream named name: what its metadata holds,
// with the figures that move from the server at o.Server when it answers
// and serves the stream, else from the logs on disk. source is a sentence
// saying which answered, for the user. A stream nobody knows is an error
// naming the streams that exist.
func DescribeStream(ctx context.Context, name string, o DescribeOptions) (d *meta.Description, source string, err error) {
	cfg := o.Config
	lay, err := meta.NewLayout(cfg.Root, cfg.Published)
	if err != nil {
		return nil, "", fmt.Errorf("config: %w", err)
	}
	var decl *config.Stream
	declIdx := -1
	for i := range cfg.Streams {
		if cfg.Streams[i].Name == name {
			decl, declIdx = &cfg.Streams[i], i
		}
	}

	var stats *Stats
	var live *StreamStats
	whyDisk := o.NoServer
	statsPath := cfg.Stats.Path()
	if o.Server != "" && statsPath == "" {
		whyDisk = "the config serves no stats (stats: false)"
	} else if o.Server != "" {
		sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		st, err := ReadStats(sctx, o.Client, o.Server, statsPath, o.User)
		cancel()
		var refused *StatsRefused
		switch {
		case errors.As(err, &refused):
			whyDisk = fmt.Sprintf("the server at %s refused %s: %s", o.Server, statsPath, refused.Status)
		case err != nil:
			whyDisk = fmt.Sprintf("no server answered at %s", o.Server)
		default:
			stats = &st
			if ss, ok := st.Find(name); ok {
				live = &ss
			} else {
				whyDisk = fmt.Sprintf("the server at %s does not list %s in %s: it does not serve it, or the user may not read its stats", o.Server, name, statsPath)
			}
		}
	}

	// With the server's figures, the log on disk is not read: it may be
	// another machine's, and the server's are the live ones.
	d, err = meta.Stored(ctx, lay, name, cfg.S3)
	if err == nil && live == nil {
		err = d.ReadLog(ctx, lay, o.Now)
	}
	switch {
	case err == nil:
	case !meta.IsNoStream(err):
		return nil, "", err
	case decl != nil && !decl.Durable:
		schemas, err := cfg.Compile()
		if err != nil {
			return nil, "", err
		}
		d = &meta.Description{Stream: name, Source: meta.SourceConfig, Columns: meta.DescribeColumns(schemas[declIdx]),
			Logs: []meta.DescribedLog{}, Seams: []int64{}, Publishers: []meta.DescribedPublisher{}}
	case live != nil:
		// Served, with its metadata elsewhere (another machine's root).
		d = &meta.Description{Stream: name, Durable: live.Durable, Columns: []meta.DescribedColumn{}, Logs: []meta.DescribedLog{}, Seams: []int64{}, Publishers: []meta.DescribedPublisher{}}
	default:
		return nil, "", noStream(name, lay, cfg, o.Server, stats)
	}
	if decl != nil {
		d.ExactlyOnce = decl.ExactlyOnce
		d.Replication.Enabled = d.Replication.Enabled || decl.Replicate
	}
	if live != nil {
		live.Describe(d)
		if d.StreamID == "" && d.Durable {
			return d, fmt.Sprintf("from the server at %s; no metadata of %s under %s, so no identity, logs or retention", o.Server, name, cfg.Root), nil
		}
		return d, fmt.Sprintf("live figures from the server at %s, the rest from the stream's metadata", o.Server), nil
	}
	if d.Source == meta.SourceConfig {
		return d, fmt.Sprintf("from the config: a live-only stream has no metadata or log (%s)", whyDisk), nil
	}
	return d, fmt.Sprintf("from the metadata and logs under %s (%s)", cfg.Root, whyDisk), nil
}

// noStream is the error for a stream that neither the metadata, the
// config nor the server knows: it names the streams each does know.
func noStream(name string, lay meta.Layout, cfg config.Config, server string, stats *Stats) error {
	var known []string
	for _, s := range cfg.Streams {
		known = append(known, s.Name)
	}
	known = append(known, meta.KnownStreams(lay)...)
	where := "no metadata under " + cfg.Root + " and the config does not declare it"
	if stats != nil {
		where += ", nor does the server at " + server + " serve it"
		for _, ss := range stats.Streams {
			known = append(known, ss.Name)
		}
	}
	slices.Sort(known)
	known = slices.Compact(known)
	list := "none"
	if len(known) > 0 {
		list = strings.Join(known, ", ")
	}
	return fmt.Errorf("stream %q does not exist: %s\nthe streams known here: %s (streamcast config prints the declared ones; GET /stats lists what a server serves)", name, where, list)
}
