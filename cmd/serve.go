package cmd

import (
	"fmt"
	"net"
	"os"

	"github.com/spf13/cobra"

	"github.com/streamcast/streamcast/pkg/broker"
)

// serveSettings are the serve keys a flag or STREAMCAST_* variable may
// override. Streams are read from the config file itself, never through
// viper, which would lower-case the property names of inline schemas.
type serveSettings struct {
	Listen string        `yaml:"listen"`
	Root   string        `yaml:"root"`
	Limits broker.Limits `yaml:"limits"`
}

func newServeCmd(a *app) *cobra.Command {
	var (
		addrFile   string
		noMaintain bool
	)
	def := broker.DefaultConfig()
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the configured streams over WebSocket",
		Long: `Serve every stream of the config file over WebSocket at ws://LISTEN/<stream>,
with GET /stats and GET /health beside them. Without a config file (or with
one that declares no streams) it serves an embedded demo stream of trades,
durable, under ./streamcast-data on 127.0.0.1:8765.

listen, root and limits.* may be overridden by flags and ` + "`STREAMCAST_*`" + `
variables (` + "`STREAMCAST_LIMITS_MAX_BACKLOG`" + `); streams come from the file only.
Beside the server, serve runs one ` + "`streamcast maintain --role R`" + ` child
process per maintenance role over every durable stream's log (seal, compact,
publish, clean, clean-published; the config's maintain: section says which
and how often). It listens for streams once every child reports ready, fails
start-up after 30 s naming the child that is not, and restarts a child that
exits. --no-maintain (or maintain: false) runs none.

SIGTERM or SIGINT stops accepting, commits and acknowledges what publishers
sent, closes every connection with 1001, has seal and publish flush (so the
published table holds every acknowledged row), stops the children and exits 0.`,
		Example: `  streamcast serve
  streamcast serve --config streamcast.yaml --listen :8765
  streamcast serve --listen 127.0.0.1:0 --addr-file /tmp/addr   # tests: find the port
  streamcast serve --no-maintain                                 # run the maintain roles yourself`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			settings := serveSettings{Listen: def.Listen, Root: def.Root, Limits: def.Limits}
			if err := a.decode("", &settings); err != nil {
				return err
			}
			cfg := broker.EmbeddedConfig()
			if a.configUsed != "" {
				fileCfg, err := broker.LoadConfigFile(a.configUsed)
				if err != nil {
					return err
				}
				if len(fileCfg.Streams) > 0 {
					cfg = fileCfg
				} else {
					a.logger.Info("the config file declares no streams; serving the embedded demo stream")
					cfg.Maintain = fileCfg.Maintain
					cfg.Published, cfg.S3, cfg.Tiers = fileCfg.Published, fileCfg.S3, fileCfg.Tiers
				}
			}
			cfg.Listen, cfg.Root, cfg.Limits = settings.Listen, settings.Root, settings.Limits
			if noMaintain {
				cfg.Maintain.Enabled = false
			}
			exe, err := os.Executable()
			if err != nil && len(cfg.Maintain.Roles()) > 0 {
				return fmt.Errorf("find the streamcast executable to run the maintenance children: %w (or run serve --no-maintain)", err)
			}
			srv, err := broker.New(cfg, broker.Options{
				Logger:     a.logger,
				Executable: exe,
				ConfigFile: a.configUsed,
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
			return srv.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.String("listen", def.Listen, "serve on this `ADDR` (host:port; :0 picks a free port)")
	f.String("root", def.Root, "keep durable streams' logs under this `DIR`")
	f.StringVar(&addrFile, "addr-file", "", "once serving, write the address listened on to `FILE` (for scripts and tests)")
	f.BoolVar(&noMaintain, "no-maintain", false, "run no maintenance child (as maintain: false); run streamcast maintain yourself")
	configFlag(f, "listen", "listen")
	configFlag(f, "root", "root")
	_ = cmd.MarkFlagDirname("root")
	return cmd
}
