package cmd

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/streamcast/streamcast/pkg/broker"
	"github.com/streamcast/streamcast/pkg/meta"
)

func newDescribeCmd(a *app) *cobra.Command {
	var format, server string
	var offline bool
	var tlsFlags *clientTLS
	cmd := &cobra.Command{
		Use:   "describe STREAM",
		Short: "Show a stream: identity, schema, logs, retention, replication, publishers",
		Long: `Show one stream: its stream_id, its schema (each column's type and
whether it may be null), its logs with their offset ranges and the seams
where one continues another, its retention window and floor, where its
table is published and how far it trails, its WAL replication and lag,
and its exactly-once publishers (id, last seq, last offset).

The end offset, the lags, the open connections and the publishers come
from the running server when one answers: the config's listen: address
(https with a tls: section), or --server. Otherwise, or with --offline,
they come from the stream's log on disk, read without a lock, so describe
works whether serve runs or not. One line on stderr says which answered.
The rest comes from the stream's metadata.

Output is a table on a terminal and one JSON object when piped; --format
chooses. A server with an auth: section needs a user holding the stats
grant on the stream (` + "`STREAMCAST_USER`" + ` and ` + "`STREAMCAST_PASSWORD`" + `, or
credentials in --server's URL).`,
		Example: `  streamcast describe trades
  streamcast describe trades --format json | jq .end_offset
  streamcast describe trades --offline`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeStreamNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if err := meta.CheckName(name); err != nil {
				return usageError{err}
			}
			table := benchOnTerminal(a.stdout)
			switch format {
			case "":
			case "table":
				table = true
			case "json":
				table = false
			default:
				return usageError{fmt.Errorf("--format %q: want json or table", format)}
			}
			if offline && cmd.Flags().Changed("server") {
				return usageError{errors.New("--offline asks no server, so --server would be ignored; give one of them")}
			}
			o := broker.DescribeOptions{Config: a.cfg, Now: time.Now(), NoServer: "--offline"}
			if !offline {
				base, err := a.cfg.ServerURL()
				if err != nil {
					o.NoServer = "the config's listen: " + a.cfg.Listen + " names no address to ask; give --server URL"
				}
				if server != "" {
					base = server
				}
				if base != "" {
					clean, user, err := streamURL(base)
					if err != nil {
						return err
					}
					tc, err := tlsFlags.config(a.logger)
					if err != nil {
						return err
					}
					tr := &http.Transport{Proxy: http.ProxyFromEnvironment, TLSClientConfig: tc}
					defer tr.CloseIdleConnections()
					o.Server, o.User, o.Client = clean, user, &http.Client{Transport: tr}
				}
			}
			d, source, err := broker.DescribeStream(cmd.Context(), name, o)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stderr, "describe %s: %s\n", name, source)
			if table {
				return d.WriteTable(a.stdout)
			}
			return a.printJSON(d)
		},
	}
	f := cmd.Flags()
	f.StringVar(&format, "format", "", "print `F`: table or json (default table on a terminal, else json)")
	f.StringVar(&server, "server", "", "ask the server at this `URL` (http or https://host:port; default from the config's listen:)")
	f.BoolVar(&offline, "offline", false, "ask no server: read the figures from the log on disk")
	tlsFlags = addClientTLSFlags(f)
	_ = cmd.RegisterFlagCompletionFunc("format", cobra.FixedCompletions([]string{"table", "json"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}
