package config

import (
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
)

// Config is read and written by its yaml tags (decode.go): the keys of
// Config are never listed by hand, so a field added to any section is known
// to the file, settable by an environment variable or flag, and printed by
// `streamcast config` at once.

// keyFromMessage makes err a *Error for the key its message begins
// with ("tiers.delete_grace is negative; …").
func keyFromMessage(err error) error { return keyFromMessageOf(reflect.TypeFor[Config](), err) }

// OverrideKeys returns, sorted, the keys an environment variable or flag
// may set: every setting of Config whose value is a scalar or a list of
// scalars, which is all of them but the streams list (a stream's inline
// schema keeps its property names' case only in the file).
func OverrideKeys() []string { return keysOf(reflect.TypeFor[Config]()) }

// Parse reads a YAML config on top of Default, as Load
// does with no file name and no overrides. Relative schema_file paths are
// resolved against dir. It does not validate: call Validate.
func Parse(data []byte, dir string) (Config, error) {
	return load(Default(), "", dir, data, nil)
}

// Load decodes a configuration: data, the contents of the config file
// named file (both empty when there is none), laid over base, then each
// override laid over that, in order (the environment's before the flags':
// a later one wins). A key the file leaves out keeps base's value; streams:
// with no stream in it keeps base's streams (Embedded's demo stream,
// for serve). Relative schema_file and tls: paths the file gives are
// resolved against the file's directory.
//
// It refuses what cannot be decoded: a document that is not YAML, an unknown
// key, a key given twice, a key that looks like a credential, a value of the
// wrong type, each as a *Error naming the key and the file and line,
// or the override it came from. It does not Validate, but it records where
// every value came from, so that Validate's errors say it too.
func Load(base Config, file string, data []byte, overrides ...Override) (Config, error) {
	dir := ""
	if file != "" {
		dir = filepath.Dir(file)
	}
	return load(base, file, dir, data, overrides)
}

func load(base Config, file, dir string, data []byte, overrides []Override) (Config, error) {
	cfg := base
	origin, err := decodeInto(&cfg, decodeSource{File: file, Data: data, Overrides: overrides, Unknown: refuseCredential})
	if err != nil {
		return base, err
	}
	if origin.InFile("streams") && dir != "" {
		for i := range cfg.Streams {
			s := &cfg.Streams[i]
			if s.SchemaFile != "" && !filepath.IsAbs(s.SchemaFile) {
				s.SchemaFile = filepath.Join(dir, s.SchemaFile)
			}
			if s.UpstreamCAFile != "" && !filepath.IsAbs(s.UpstreamCAFile) {
				s.UpstreamCAFile = filepath.Join(dir, s.UpstreamCAFile)
			}
		}
	}
	if dir != "" {
		cfg.TLS.resolve(dir, origin.InFile)
	}
	cfg.origin = origin
	return cfg, nil
}

// refuseCredential explains an unknown key that looks like a credential.
func refuseCredential(key string) error {
	if credentialKey(key) {
		return errors.New(credentialsNote)
	}
	return nil
}

// From says where the value of key (a path such as limits.max_backlog)
// came from, in the words errors use: a file and line, an environment
// variable, a flag, or "default". It is "" for a Config built in code.
func (c *Config) From(key string) string { return c.origin.From(key) }

// File is the config file c was read from, as it was named ("" when none,
// or for a Config built in code).
func (c *Config) File() string {
	if c.origin == nil {
		return ""
	}
	return c.origin.file
}

// explain fills in where the value of a *Error's key came from.
func (c *Config) explain(err error) error { return c.origin.Explain(err) }

// YAML renders c as the YAML document Load reads back into the same
// Config: every section, each stream with its schema, durations and sizes
// in the file's forms. Fields tagged secret:"true" are shown as
// "[redacted]".
func (c Config) YAML() ([]byte, error) {
	b, err := renderYAML(c)
	if err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	return b, nil
}

// JSON renders c as one compact JSON object with the keys and values of
// YAML (JSON is YAML, so it also reads back). Fields tagged secret:"true"
// are shown as "[redacted]".
func (c Config) JSON() ([]byte, error) {
	b, err := renderJSON(c)
	if err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	return b, nil
}
