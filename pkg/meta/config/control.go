package config

import (
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"

	"github.com/streamcast/streamcast/pkg/logstore/warehouse"
	"github.com/streamcast/streamcast/pkg/meta"
)

// Defaults of the control: section.
const (
	// DefaultControlMaxPending bounds the control operations in flight.
	DefaultControlMaxPending = 32
	// DefaultControlMaxBytes bounds a control request's body.
	DefaultControlMaxBytes = 256 << 10
)

// Control is the control: section: it turns on the control API
// (/control/v1), which declares, starts, stops, migrates and retires
// streams while serve runs. The streams it manages live in a registry
// (a SQLite file `streamcast control init` creates) beside the streams:
// list, and never share a name with one. Everything that names a place
// (a directory, a URL, a credential source) is in a profile here: a
// request over HTTP names a profile, never a path.
type Control struct {
	// Registry is the registry's file; empty is
	// <root>/_control/registry.db. serve never creates it.
	Registry string `yaml:"registry"`
	// MaxPending bounds the operations accepted and not yet finished;
	// past it a mutation gets 429 with Retry-After: 1.
	MaxPending int `yaml:"max_pending"`
	// MaxBytes bounds a request's body; a larger one gets 413.
	MaxBytes int `yaml:"max_bytes"`
	// Profiles are the storage a registered stream may name, by name.
	Profiles map[string]Profile `yaml:"profiles"`
	// Protected names registered streams whose consumers rebuild their
	// state from offset 1: the API refuses to retire or migrate them (403),
	// as the offline commands refuse a stream with a history_guard.
	Protected []string `yaml:"protected"`
}

// Profile is one named storage for registered streams: the root its logs
// live under, where they publish, how to reach S3, the tier settings each
// new log stores, and whether their WAL is replicated.
type Profile struct {
	// Root holds the streams' logs, as the top-level root: does; empty is
	// the top-level root.
	Root string `yaml:"root"`
	// Published is the prefix their tables publish under, as the
	// top-level published: is; empty is <root>/published.
	Published string `yaml:"published"`
	// S3 says how to reach an s3:// published prefix (credentials come
	// from the AWS environment or profile, never config).
	S3 warehouse.S3 `yaml:"s3"`
	// Tiers are the tier settings each new log stores.
	Tiers Tiers `yaml:"tiers"`
	// Replicate ships each durable stream's WAL, as a stream's
	// replicate: true does.
	Replicate bool `yaml:"replicate"`
}

// The registry's default place, <root>/_control/registry.db. The registry
// is pkg/broker/control's, but its default path is part of the config
// (control.registry's default, which `streamcast control init` and serve
// both read through RegistryPath), and config sits below broker, so it
// cannot take the name from control: control takes its path from here.
const (
	controlDir   = "_control"
	registryFile = "registry.db"
)

// RegistryPath returns the registry's file: control.registry, or
// <root>/_control/registry.db.
func (c *Config) RegistryPath() string {
	if c.Control == nil {
		return ""
	}
	if c.Control.Registry != "" {
		return c.Control.Registry
	}
	return filepath.Join(c.Root, controlDir, registryFile)
}

// ProfileNames returns the profiles' names, sorted.
func (c *Control) ProfileNames() []string {
	if c == nil {
		return nil
	}
	names := make([]string, 0, len(c.Profiles))
	for n := range c.Profiles {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// ProfileConfig returns the server's config with the storage of profile
// name in place of root, published, s3 and tiers: what a registered
// stream's log is opened, created and checked with.
func (c *Config) ProfileConfig(name string) (Config, error) {
	if c.Control == nil {
		return Config{}, fmt.Errorf("storage profile %q: the config has no control: section", name)
	}
	p, ok := c.Control.Profiles[name]
	if !ok {
		return Config{}, fmt.Errorf("storage profile %q is not one of the config's control.profiles (%s)", name, strings.Join(c.Control.ProfileNames(), ", "))
	}
	pc := *c
	pc.Streams = nil
	if p.Root != "" {
		pc.Root = p.Root
	}
	pc.Published, pc.S3, pc.Tiers = p.Published, p.S3, p.Tiers
	return pc, nil
}

// validate checks the section: bounds of at least 1, and each profile's
// storage as the top-level storage is checked.
func (c *Control) validate(top *Config) error {
	if c == nil {
		return nil
	}
	if c.MaxPending < 1 {
		return keyErrorf("control.max_pending", "control.max_pending is %d; it must be at least 1 (the default is %d)", c.MaxPending, DefaultControlMaxPending)
	}
	if c.MaxBytes < 1 {
		return keyErrorf("control.max_bytes", "control.max_bytes is %d; it must be at least 1 (the default is %d)", c.MaxBytes, DefaultControlMaxBytes)
	}
	for _, name := range c.ProfileNames() {
		key := "control.profiles." + name
		if err := meta.CheckName(name); err != nil {
			return keyErrorf(key, "%s: the profile's name %v", key, err)
		}
		pc, _ := top.ProfileConfig(name)
		if strings.TrimSpace(pc.Root) == "" {
			return keyErrorf(key+".root", "%s.root is empty and so is root; give the directory its streams' logs live under", key)
		}
		if err := pc.validateStorage(); err != nil {
			return keyErrorf(key, "%s: %v", key, err)
		}
	}
	return nil
}

// UnmarshalYAML fills the section on top of its defaults.
func (c *Control) UnmarshalYAML(unmarshal func(any) error) error {
	type plain Control
	p := plain{MaxPending: DefaultControlMaxPending, MaxBytes: DefaultControlMaxBytes}
	if err := unmarshal(&p); err != nil {
		return err
	}
	*c = Control(p)
	return nil
}

// ServerURL is the URL a client on this machine reaches the server the
// config describes at: http:// or, with a tls: section, https://, and the
// listen: address, 127.0.0.1 for an unspecified host. It is an error when
// listen: names no fixed port (:0 picks one when serve starts).
func (c *Config) ServerURL() (string, error) {
	host, port, err := net.SplitHostPort(c.Listen)
	from := ""
	if f := c.From("listen"); f != "" {
		from = " (" + f + ")"
	}
	if err != nil || port == "" || port == "0" {
		return "", fmt.Errorf("the config's listen: is %q%s, which names no fixed port, so where the server listens is not known here; "+
			"give --server http://HOST:PORT (serve logs the address as \"listening on …\")", c.Listen, from)
	}
	switch ip := net.ParseIP(host); {
	case host == "" || (ip != nil && ip.IsUnspecified() && ip.To4() != nil):
		host = "127.0.0.1"
	case ip != nil && ip.IsUnspecified():
		host = "::1" // [::] may be IPv6 only; its loopback is always served
	}
	scheme := "http"
	if c.TLS.Enabled() {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port), nil
}
