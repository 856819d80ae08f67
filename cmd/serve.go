package cmd

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"sync"
	"time"

	"github.com/charmbracelet/log"
	"github.com/spf13/cobra"

	"github.com/streamcast/streamcast/pkg/broker"
	"github.com/streamcast/streamcast/pkg/meta/config"
)

func newServeCmd(a *app) *cobra.Command {
	var addrFile, pprofAddr string
	def := config.Default()
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the configured streams over WebSocket",
		Long: `Serve every stream of the config file over WebSocket at ws://LISTEN/<stream>,
with GET /stats, GET /health and GET /metrics (Prometheus; metrics.enabled:
false turns it off) beside them. Without a config file (or with
one that declares no streams) it serves an embedded demo stream of trades,
durable, under ./streamcast-data on 127.0.0.1:8765.

Every key but streams may be overridden by a ` + "`STREAMCAST_*`" + ` variable
(` + "`STREAMCAST_LIMITS_MAX_BACKLOG`" + `), and listen, root and maintain by the flags
below; streams come from the file only. "streamcast config" prints the
configuration serve would run with and runs the same checks; at debug level
serve logs it, in config --json's form.

Beside the server, serve runs one ` + "`streamcast maintain --role R`" + ` child
process per maintenance role over every durable stream's log (seal, compact,
publish, clean, clean-published; the config's maintain: section says which
and how often). It listens for streams once every child reports ready, fails
start-up after 30 s naming the child that is not, and restarts a child that
exits. --no-maintain (or maintain: false) runs none.

SIGHUP reads the config again (file, environment, flags) and runs the same
checks: streams added to the file start and streams removed from it stop
(their publishers answered and closed with 1001, their logs sealed and
published, their subscribers closed with 1001, their locks released), each
logged, while the other streams keep serving. A stream whose declaration
changed keeps serving as it was, and the log says why. The auth: section
applies to new connections at once; connections already open keep what they
were admitted to. A config that fails the checks is logged and the running
one kept.

With an auth: section every request but GET /health must authenticate (HTTP
Basic, checked against the users' bcrypt hashes; ` + "`streamcast auth hash`" + ` makes
one) and hold a grant for what it asks, checked before the WebSocket upgrade:
401 without good credentials, 403 without the grant. Without one, serve logs a
warning at start when it listens on an address other than loopback.

SIGTERM or SIGINT stops accepting, commits and acknowledges what publishers
sent, closes every connection with 1001, has seal and publish flush (so the
published table holds every acknowledged row), stops the children and exits 0.

--pprof ADDR serves Go's profiler (net/http/pprof, under /debug/pprof/) on a
listener of its own, apart from the streams' one and without auth, so it
only accepts a loopback address (127.0.0.1:6060, [::1]:6060, localhost:6060).
Off by default. A CPU profile to attach to a performance report:
curl -o cpu.pprof 'http://127.0.0.1:6060/debug/pprof/profile?seconds=20'`,
		Example: `  streamcast serve
  streamcast serve --config streamcast.yaml --listen :8765
  streamcast serve --listen 127.0.0.1:0 --addr-file /tmp/addr   # tests: find the port
  streamcast serve --no-maintain                                 # run the maintain roles yourself
  streamcast serve --pprof 127.0.0.1:6060                        # profile it: go tool pprof http://127.0.0.1:6060/debug/pprof/profile`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := a.cfg // read once by setup; a reload reads anew with loadServeConfig
			if pprofAddr != "" {
				if err := checkLoopback(pprofAddr); err != nil {
					return usageError{err}
				}
			}
			if err := a.checkServeConfig(&cfg); err != nil {
				return err
			}
			exe, err := os.Executable()
			if err != nil && len(cfg.Maintain.Roles()) > 0 {
				return fmt.Errorf("find the streamcast executable to run the maintenance children: %w (or run serve --no-maintain)", err)
			}
			if err := a.logServeConfig(cfg); err != nil {
				return err
			}
			if pprofAddr != "" {
				addr, stop, err := servePprof(pprofAddr)
				if err != nil {
					return err
				}
				a.logger.Info("serving the profiler", "url", "http://"+addr.String()+"/debug/pprof/")
				defer stop()
			}
			// Relay streams send these to an upstream whose URL has none.
			var upCred *url.Userinfo
			if slices.ContainsFunc(cfg.Streams, func(s config.Stream) bool { return s.IsRelay() }) {
				if upCred, err = envCredentials(); err != nil {
					return err
				}
			}
			srv, err := broker.New(cfg, broker.Options{
				Logger:              a.logger,
				Executable:          exe,
				ConfigFile:          a.configUsed,
				UpstreamCredentials: upCred,
				TuneGC:              true,
				OnReady: func(addr net.Addr) {
					if addrFile != "" {
						if err := os.WriteFile(addrFile, []byte(addr.String()+"\n"), 0o644); err != nil {
							a.logger.Error("write --addr-file", "err", err)
						}
					}
				},
			})
			if err != nil {
				return fmt.Errorf("config: %w", err)
			}
			return runReloading(cmd.Context(), srv, a.reloadServeConfig)
		},
	}
	f := cmd.Flags()
	f.String("listen", def.Listen, "serve on this `ADDR` (host:port; :0 picks a free port)")
	f.String("root", def.Root, "keep durable streams' logs under this `DIR`")
	f.StringVar(&addrFile, "addr-file", "", "once serving, write the address listened on to `FILE` (for scripts and tests)")
	f.StringVar(&pprofAddr, "pprof", "", "serve Go's profiler (net/http/pprof) on this loopback `ADDR`, apart from the streams (off by default)")
	f.Bool("no-maintain", false, "run no maintenance child (as maintain: false); run streamcast maintain yourself")
	config.MarkFlag(f, "listen", "listen")
	config.MarkFlag(f, "root", "root")
	config.MarkSwitch(f, "no-maintain", "maintain", "false")
	_ = cmd.MarkFlagDirname("root")
	return cmd
}

// servePprof serves net/http/pprof's handlers on a listener of their own
// at addr, which must be a loopback address: the profiler has no auth, and
// a profile shows the server's internals. It returns the address listened
// on and the function that stops the listener and waits for its goroutine.
func servePprof(addr string) (net.Addr, func(), error) {
	if err := checkLoopback(addr); err != nil {
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("--pprof: listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 30 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = hs.Serve(ln) // ends with ErrServerClosed when stopped
	}()
	return ln.Addr(), func() {
		_ = hs.Close() // a profile in progress is cut off: serve is exiting
		<-done
	}, nil
}

// checkLoopback refuses an address whose host is not a loopback IP or
// "localhost" (an empty host, ":6060", would listen on every interface).
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--pprof %q: %w; give host:port, as 127.0.0.1:6060", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("--pprof %q: the profiler has no authentication, so it listens on loopback only; give 127.0.0.1:PORT or [::1]:PORT and reach it remotely through an SSH tunnel", addr)
}

// loadServeConfig reads the configuration anew, as setup did at start (the
// config file once, the environment, serve's flags), and checks it as serve
// does: what serve runs with after a reload (SIGHUP). The first start uses
// the configuration setup read, through the same checks.
func (a *app) loadServeConfig() (config.Config, error) {
	cfg, err := a.loadConfig()
	if err != nil {
		return cfg, err
	}
	if err := a.checkServeConfig(&cfg); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// checkServeConfig validates cfg exactly as `streamcast config` does, and
// notes when the file declares no streams.
func (a *app) checkServeConfig(cfg *config.Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	for _, w := range cfg.Warnings() {
		a.logger.Warn(w)
	}
	if a.configUsed != "" && cfg.From("streams") == "default" {
		a.logger.Info("the config file declares no streams; serving the embedded demo stream", "file", a.configUsed)
	}
	return nil
}

// logServeConfig logs, at debug level, the whole configuration serve hands
// the server, rendered as config --json prints it, so that the two can be
// compared (testscript/config_serve.txtar does). Call it with the very value
// passed to broker.New.
func (a *app) logServeConfig(cfg config.Config) error {
	if a.logger.GetLevel() > log.DebugLevel {
		return nil
	}
	b, err := cfg.JSON()
	if err != nil {
		return err
	}
	a.logger.Debug("serving with this configuration", "config", loggedJSON(b))
	return nil
}

// loggedJSON is a JSON document as a log value: embedded as JSON in a JSON
// log line, written as its text in a text one.
type loggedJSON []byte

func (j loggedJSON) MarshalJSON() ([]byte, error) { return j, nil }

func (j loggedJSON) Format(f fmt.State, _ rune) { _, _ = f.Write(j) }

// runReloading runs srv until ctx ends, reading the config anew and handing
// it to srv.Reload on each SIGHUP. The reload goroutine ends before it
// returns.
func runReloading(ctx context.Context, srv *broker.Server, reload func(*broker.Server)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hup := make(chan os.Signal, 1)
	if len(reloadSignal) > 0 {
		signal.Notify(hup, reloadSignal...)
		defer signal.Stop(hup)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				reload(srv)
			}
		}
	}()
	err := srv.Run(ctx)
	cancel()
	wg.Wait()
	return err
}

// reloadServeConfig is serve's SIGHUP: the file, environment and flags are
// read and checked again as at start; a config that fails the checks is
// logged and the running one kept.
func (a *app) reloadServeConfig(srv *broker.Server) {
	a.logger.Info("SIGHUP: reading the configuration again", "file", a.configUsed)
	cfg, err := a.loadServeConfig()
	if err != nil {
		a.logger.Error("reload refused; still serving the running configuration", "err", err)
		return
	}
	if err := a.logServeConfig(cfg); err != nil {
		a.logger.Error("reload: log the configuration", "err", err)
	}
	if err := srv.Reload(cfg); err != nil {
		a.logger.Error("reload applied in part", "err", err)
		return
	}
	a.logger.Info("reload applied")
}
