package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/olekukonko/tablewriter"
	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/streamcast/streamcast/pkg/broker"
	"github.com/streamcast/streamcast/pkg/broker/control"
	"github.com/streamcast/streamcast/pkg/meta/config"
)

// streamsFlags are the flags every streams subcommand shares.
type streamsFlags struct {
	a       *app
	server  string
	tls     *clientTLS
	wait    bool
	timeout time.Duration
}

func newStreamsCmd(a *app) *cobra.Command {
	f := &streamsFlags{a: a}
	cmd := &cobra.Command{
		Use:   "streams",
		Short: "Manage a running server's registered streams over its control API",
		Long: `Declare, start, stop, migrate and retire streams on a running server,
through its control API (/control/v1; the server's config needs a control:
section and a registry made with "streamcast control init").

The server is the one the config describes (its listen: address, over
https when it has a tls: section) unless --server names another. For
https, --ca-file trusts the CA that signed the server's certificate, as
tail's does. The streams of the server's config file are listed too
("source": "config"); they change in the file, not here. list works on a
server without a control: section as well: it lists the streams the
server's /stats shows, every one from its config file.

Output is a table on a terminal and JSON when piped (one object per line).
A change waits for its operation to succeed or fail (--wait=false returns
once the server accepted it). Every change carries an Idempotency-Key made
from the request itself, so running a command again after a lost answer
gets the first answer back instead of acting twice.

` + credentialsHelp,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.server, "server", "", "the server's `URL` (http or https; default: the config's listen: address, https with its tls:)")
	f.tls = addClientTLSFlags(pf)
	pf.BoolVar(&f.wait, "wait", true, "wait for each change's operation to end")
	pf.DurationVar(&f.timeout, "timeout", 5*time.Minute, "give up waiting after this long")
	cmd.AddCommand(
		newStreamsListCmd(a, f),
		newStreamsGetCmd(a, f),
		newStreamsApplyCmd(a, f),
		newStreamsDesiredCmd(a, f, "start", control.Serving, "Serve a registered stream"),
		newStreamsDesiredCmd(a, f, "stop", control.Stopped, "Stop serving a registered stream (its publishers and subscribers get 1001)"),
		newStreamsDesiredCmd(a, f, "retire", control.Retired, "Retire a registered stream for good: replay only, no more rows"),
		newStreamsMigrateCmd(a, f),
	)
	a.completeNameArgs(cmd)
	return cmd
}

func (f *streamsFlags) client() (*control.Client, error) {
	server := f.server
	if server == "" {
		var err error
		if server, err = f.a.cfg.ServerURL(); err != nil {
			return nil, err
		}
	}
	base, cred, err := streamURL(server)
	if err != nil {
		return nil, err
	}
	tc, err := f.tls.config(f.a.logger)
	if err != nil {
		return nil, err
	}
	c := &control.Client{Base: base, User: cred}
	if tc != nil {
		if !strings.HasPrefix(base, "https://") {
			return nil, usageError{fmt.Errorf("--ca-file, --cert-file, --key-file and --insecure are for an https server, and the server is %s", base)}
		}
		c.HTTP = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
	}
	return c, nil
}

// read reads the stream name, with the client and the context the
// command goes on with; cancel is nil when err is not.
func (f *streamsFlags) read(cmd *cobra.Command, name string) (*control.Client, context.Context, context.CancelFunc, *control.StreamView, error) {
	c, err := f.client()
	if err != nil {
		return nil, nil, nil, nil, err
	}
	ctx, cancel := f.context(cmd)
	v, err := c.Get(ctx, name)
	if err != nil {
		cancel()
		return nil, nil, nil, nil, err
	}
	return c, ctx, cancel, v, nil
}

func (f *streamsFlags) context(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	return context.WithTimeout(cmd.Context(), f.timeout)
}

func newStreamsListCmd(a *app, f *streamsFlags) *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Short:   "List the streams the server serves: registered ones and those of its config file",
		Example: `  streamcast streams list --config streamcast.yaml`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			ctx, cancel := f.context(cmd)
			defer cancel()
			var rows [][]string
			cursor := ""
			for {
				p, err := c.List(ctx, cursor, 0)
				var ce *control.ClientError
				if cursor == "" && errors.As(err, &ce) && ce.Body.Code == control.CodeNoControlAPI {
					return a.listServed(ctx, c)
				}
				if err != nil {
					return err
				}
				for _, raw := range p.Streams {
					if !benchOnTerminal(a.stdout) {
						fmt.Fprintf(a.stdout, "%s\n", raw)
						continue
					}
					var s struct {
						Name     string           `json:"name"`
						Source   string           `json:"source"`
						Desired  string           `json:"desired"`
						Revision *int64           `json:"revision"`
						StreamID *string          `json:"stream_id"`
						Observed control.Observed `json:"observed"`
					}
					_ = json.Unmarshal(raw, &s)
					id, rev := "", "-"
					if s.StreamID != nil {
						id = *s.StreamID
					}
					if s.Revision != nil {
						rev = strconv.FormatInt(*s.Revision, 10)
					}
					rows = append(rows, []string{s.Name, s.Source, s.Desired, s.Observed.State, rev, id})
				}
				if p.NextCursor == nil {
					break
				}
				cursor = *p.NextCursor
			}
			if benchOnTerminal(a.stdout) {
				return renderTable(a.stdout, []string{"name", "source", "desired", "observed", "revision", "stream id"}, rows)
			}
			return nil
		},
	}
}

// listServed lists the streams of a server without a control API, from
// its /stats: each is its config file's, shown as the API shows those.
func (a *app) listServed(ctx context.Context, c *control.Client) error {
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	served, err := broker.ListServed(ctx, hc, c.Base, a.cfg.Stats.Path(), c.User)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stderr, "streams list: the server at %s has no control API, so these are the streams its %s lists, all from its config file\n", c.Base, a.cfg.Stats.Path())
	if benchOnTerminal(a.stdout) {
		rows := make([][]string, 0, len(served))
		for _, s := range served {
			rows = append(rows, []string{s.Name, s.Source, s.Desired, s.Observed.State, "-", ""})
		}
		return renderTable(a.stdout, []string{"name", "source", "desired", "observed", "revision", "stream id"}, rows)
	}
	for _, s := range served {
		if err := a.printJSON(s); err != nil {
			return err
		}
	}
	return nil
}

func renderTable(w io.Writer, header []string, rows [][]string) error {
	t := tablewriter.NewWriter(w)
	t.Header(header)
	if err := t.Bulk(rows); err != nil {
		return err
	}
	return t.Render()
}

func newStreamsGetCmd(a *app, f *streamsFlags) *cobra.Command {
	return &cobra.Command{
		Use:     "get NAME",
		Short:   "Show a stream: declaration, desired and observed state, revision",
		Example: `  streamcast streams get trades --config streamcast.yaml`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, _, cancel, v, err := f.read(cmd, args[0])
			if err != nil {
				return err
			}
			defer cancel()
			if !benchOnTerminal(a.stdout) {
				return a.printJSON(v)
			}
			id := ""
			if v.StreamID != nil {
				id = *v.StreamID
			}
			if v.Source == control.SourceConfig {
				return renderTable(a.stdout, []string{"key", "value"}, [][]string{
					{"name", v.Name}, {"source", "config (the server's config file declares it; change it there)"},
					{"observed", v.Observed.State}, {"stream id", id},
				})
			}
			decl, _ := json.Marshal(v.Declaration)
			return renderTable(a.stdout, []string{"key", "value"}, [][]string{
				{"name", v.Name}, {"source", v.Source}, {"desired", v.Desired}, {"observed", v.Observed.State},
				{"revision", strconv.FormatInt(v.Revision, 10)}, {"etag", v.ETag}, {"stream id", id},
				{"profile", v.Declaration.StorageProfile}, {"declaration", string(decl)},
			})
		},
	}
}

func newStreamsApplyCmd(a *app, f *streamsFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "apply FILE...",
		Short: "Create or replace registered streams from YAML or JSON declarations",
		Long: `Apply the declarations in each FILE (YAML or JSON): a mapping with the
stream's name and its declaration (schema, storage_profile, sort_by,
initialization, exactly_once, max_replay, group_commit, limits), or a list
of them. A stream that does not exist is created (stopped); one that does
is replaced, which the server refuses unless the stream is stopped (a
schema change of a stream with a log is a migration: streams migrate).
A declaration equal to the server's changes nothing.`,
		Example: `  streamcast streams apply trades.yaml --config streamcast.yaml`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			ctx, cancel := f.context(cmd)
			defer cancel()
			for _, file := range args {
				decls, err := readDeclarations(file)
				if err != nil {
					return err
				}
				for _, d := range decls {
					etag := ""
					v, err := c.Get(ctx, d.name)
					var none *control.NoStream
					switch {
					case err == nil:
						etag = v.ETag
					case errors.As(err, &none):
					default:
						return err
					}
					acc, err := c.Put(ctx, d.name, d.body, etag)
					if err != nil {
						return fmt.Errorf("apply %s to stream %q: %w", file, d.name, err)
					}
					if err := a.finish(ctx, c, f, d.name, "apply", acc); err != nil {
						return err
					}
				}
			}
			return nil
		},
	}
}

// declarationFile is one stream of an apply file.
type declarationFile struct {
	name string
	body json.RawMessage
}

// readDeclarations reads a YAML or JSON file of declarations, keeping the
// schema's key order (property order is column order).
func readDeclarations(file string) ([]declarationFile, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if len(doc.Content) == 0 {
		return nil, fmt.Errorf("%s holds no declaration", file)
	}
	items := []*yaml.Node{doc.Content[0]}
	if doc.Content[0].Kind == yaml.SequenceNode {
		items = doc.Content[0].Content
	}
	var out []declarationFile
	for _, n := range items {
		js, err := config.NodeJSON(nil, n)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		var m map[string]json.RawMessage
		dec := json.NewDecoder(bytes.NewReader(js))
		if err := dec.Decode(&m); err != nil {
			return nil, fmt.Errorf("%s, line %d: a declaration is a mapping with name, schema, storage_profile, …", file, n.Line)
		}
		var name string
		if err := json.Unmarshal(m["name"], &name); err != nil || name == "" {
			return nil, fmt.Errorf("%s, line %d: the declaration has no name; give name: STREAM", file, n.Line)
		}
		delete(m, "name")
		body, err := json.Marshal(m)
		if err != nil {
			return nil, err
		}
		out = append(out, declarationFile{name, body})
	}
	return out, nil
}

func newStreamsDesiredCmd(a *app, f *streamsFlags, use, state, short string) *cobra.Command {
	return &cobra.Command{
		Use:     use + " NAME",
		Short:   short,
		Example: "  streamcast streams " + use + " trades --config streamcast.yaml",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ctx, cancel, v, err := f.read(cmd, args[0])
			if err != nil {
				return err
			}
			defer cancel()
			acc, err := c.SetDesired(ctx, args[0], state, v.ETag)
			if err != nil {
				return err
			}
			return a.finish(ctx, c, f, args[0], use, acc)
		},
	}
}

func newStreamsMigrateCmd(a *app, f *streamsFlags) *cobra.Command {
	var schemaFile string
	var sortBy []string
	cmd := &cobra.Command{
		Use:   "migrate NAME --schema FILE",
		Short: "Migrate a registered stream to a new schema, online",
		Long: `Move a registered stream to the schema in FILE (YAML or JSON) and the
--sort-by columns, while the server runs: the stream's publishers are
closed with 1001 once what they sent is acknowledged, its log is sealed,
published and fenced, and the stream continues in a new log starting at
exactly the old end (the seam). It needs the migrate grant.`,
		Example: `  streamcast streams migrate trades --schema trades-v2.yaml --config streamcast.yaml`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := os.ReadFile(schemaFile)
			if err != nil {
				return err
			}
			var n yaml.Node
			if err := yaml.Unmarshal(b, &n); err != nil || len(n.Content) == 0 {
				return fmt.Errorf("%s is not a YAML or JSON schema", schemaFile)
			}
			sch, err := config.NodeJSON(nil, n.Content[0])
			if err != nil {
				return fmt.Errorf("%s: %w", schemaFile, err)
			}
			c, ctx, cancel, v, err := f.read(cmd, args[0])
			if err != nil {
				return err
			}
			defer cancel()
			if v.StreamID == nil {
				return fmt.Errorf("stream %q has no log yet, so there is nothing to migrate; change its schema with streams apply", args[0])
			}
			if sortBy == nil {
				sortBy = []string{}
			}
			acc, err := c.Migrate(ctx, args[0], control.Migration{StreamID: *v.StreamID, Schema: sch, SortBy: sortBy}, v.ETag)
			if err != nil {
				return err
			}
			return a.finish(ctx, c, f, args[0], "migrate", acc)
		},
	}
	cmd.Flags().StringVar(&schemaFile, "schema", "", "the new JSON Schema, a YAML or JSON `FILE`")
	cmd.Flags().StringSliceVar(&sortBy, "sort-by", nil, "the new sort_by `columns`")
	_ = cmd.MarkFlagRequired("schema")
	return cmd
}

// finish waits for an accepted change's operation (with --wait) and
// reports it: a sentence on stderr, a JSON line on stdout.
func (a *app) finish(ctx context.Context, c *control.Client, f *streamsFlags, name, what string, acc *control.Accepted) error {
	status := acc.Status
	if acc.HTTPStatus == http.StatusOK {
		fmt.Fprintf(a.stderr, "stream %s: nothing to %s; the server already has it so (revision %d)\n", name, what, acc.Revision)
	} else if f.wait {
		op, err := c.Wait(ctx, acc.OperationID, 100*time.Millisecond)
		if err != nil {
			return err
		}
		status = op.Status
		fmt.Fprintf(a.stderr, "stream %s: %s succeeded (operation %s)\n", name, what, op.ID)
	} else {
		fmt.Fprintf(a.stderr, "stream %s: %s accepted (operation %s); poll it with GET /control/v1/operations/%s\n", name, what, acc.OperationID, acc.OperationID)
	}
	return a.printJSON(struct {
		Name        string `json:"name"`
		OperationID string `json:"operation_id"`
		Status      string `json:"status"`
		Revision    int64  `json:"revision"`
	}{name, acc.OperationID, status, acc.Revision})
}
