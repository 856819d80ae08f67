package cmd

import (
	"net"
	"strings"

	"github.com/spf13/cobra"

	"github.com/streamcast/streamcast/pkg/meta/config"
)

// Shell completion of the arguments that name a stream. The names come
// from the configuration, resolved as the command itself would resolve it
// (--config, $STREAMCAST_CONFIG or ./streamcast.yaml, over the embedded
// demo), so what completes is what the command would find. Cobra calls
// these from its hidden __complete command, before the root's
// PersistentPreRunE would read the configuration, so each reads it here;
// a configuration that does not load completes nothing rather than print
// an error into the user's command line.

// completeStreamNames is the ValidArgsFunction of a command whose first
// argument is a stream's name (snapshot STREAM, streams get NAME, …): the
// names of the streams the configuration declares. Later arguments get no
// completion; wrap it in thenFiles when they are files.
func (a *app) completeStreamNames(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	cfg, ok := a.completionConfig(cmd)
	if !ok {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for _, s := range cfg.Streams {
		if s.Name != "" && strings.HasPrefix(s.Name, toComplete) {
			out = append(out, s.Name)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeNameArgs gives every subcommand of parent whose first argument
// is a stream's NAME or STREAM (streams get NAME) completeStreamNames,
// unless it has its own.
func (a *app) completeNameArgs(parent *cobra.Command) {
	for _, sub := range parent.Commands() {
		_, rest, _ := strings.Cut(sub.Use, " ")
		if sub.ValidArgsFunction == nil && (strings.HasPrefix(rest, "NAME") || strings.HasPrefix(rest, "STREAM")) {
			sub.ValidArgsFunction = a.completeStreamNames
		}
	}
}

// completeStreamURLs is the ValidArgsFunction of a command whose first
// argument is a stream's URL (tail URL, publish URL): ws://HOST:PORT/NAME
// for each stream the configuration declares, at the address it listens
// on (wss:// when it has a tls: section; 127.0.0.1 for an address that
// listens on every interface).
func (a *app) completeStreamURLs(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	cfg, ok := a.completionConfig(cmd)
	if !ok {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	host, port, err := net.SplitHostPort(cfg.Listen)
	if err != nil || port == "0" {
		return nil, cobra.ShellCompDirectiveNoFileComp // a port picked at start: no URL to offer
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	scheme := "ws://"
	if cfg.TLS.Enabled() {
		scheme = "wss://"
	}
	base := scheme + net.JoinHostPort(host, port) + "/"
	var out []string
	for _, s := range cfg.Streams {
		if u := base + s.Name; s.Name != "" && strings.HasPrefix(u, toComplete) {
			out = append(out, u)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// thenFiles completes the first argument with first and every later one
// with file names (ingest STREAM FILE..., publish URL FILE...).
func thenFiles(first cobra.CompletionFunc) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) == 0 {
			return first(cmd, args, toComplete)
		}
		return nil, cobra.ShellCompDirectiveDefault
	}
}

// completionConfig resolves the configuration for a completion: --config
// and the flags on the command line so far, as setup would.
func (a *app) completionConfig(cmd *cobra.Command) (config.Config, bool) {
	a.cmd = cmd
	cfg, err := a.loadConfig()
	if err != nil {
		cobra.CompDebugln("no completion: "+err.Error(), false) // to $BASH_COMP_DEBUG_FILE only
		return config.Config{}, false
	}
	return cfg, true
}
