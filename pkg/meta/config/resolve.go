package config

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// Where Resolve looks for the configuration, beside the defaults.
const (
	// EnvPrefix begins every key's environment variable: STREAMCAST_LOG_LEVEL
	// sets log.level (EnvVar).
	EnvPrefix = "STREAMCAST"
	// FileVar names the config file when --config does not.
	FileVar = EnvPrefix + "_CONFIG"
	// DefaultFile is read from the working directory when neither --config
	// nor FileVar names a file, if it exists.
	DefaultFile = "streamcast.yaml"
)

const (
	// fileKey is viper's key for the config file's name: with AutomaticEnv
	// and EnvPrefix, viper reads it from FileVar.
	fileKey = "config"
	// keyAnnotation marks a flag as the command-line form of a key (MarkFlag,
	// MarkSwitch): [key] or [key, value].
	keyAnnotation = "streamcast_config_key"
)

// envKey turns a key path into its variable's suffix: log.level is LOG_LEVEL.
var envKey = strings.NewReplacer(".", "_", "-", "_")

// EnvVar is the environment variable that sets key (a path such as
// limits.max_backlog): STREAMCAST_LIMITS_MAX_BACKLOG.
func EnvVar(key string) string {
	return EnvPrefix + "_" + strings.ToUpper(envKey.Replace(key))
}

// MarkFlag marks the flag name of fs as the command-line form of key: when
// the command runs and the flag is given, it overrides the environment and
// the config file for that key. Declare the flag with the key's default
// (Default), so that its help shows it.
func MarkFlag(fs *pflag.FlagSet, name, key string) {
	if err := fs.SetAnnotation(name, keyAnnotation, []string{key}); err != nil {
		panic(fmt.Sprintf("config.MarkFlag: %v", err)) // a programming error in the command tree, not input
	}
}

// MarkSwitch marks the boolean flag name of fs as setting key to value when
// it is given: serve's --no-maintain sets maintain to false.
func MarkSwitch(fs *pflag.FlagSet, name, key, value string) {
	if err := fs.SetAnnotation(name, keyAnnotation, []string{key, value}); err != nil {
		panic(fmt.Sprintf("config.MarkSwitch: %v", err)) // a programming error in the command tree, not input
	}
}

// Sources says where Resolve finds the configuration a command runs with.
type Sources struct {
	// File is the config file named on the command line (--config); ""
	// reads the one FileVar names, else DefaultFile if it exists. A file
	// named either way must exist.
	File string
	// Flags are the running command's flags, parsed. Those marked with
	// MarkFlag or MarkSwitch and given override their keys; nil has none.
	Flags *pflag.FlagSet
}

// Resolve reads the configuration a command runs with, in layers, each
// overriding the one before: Embedded, the config file, the STREAMCAST_*
// environment variables (EnvVar; an empty one counts as unset, and a list
// takes comma-separated items), the flags. viper does the layering: it
// finds and reads the file and looks each key up in the environment and
// the flags. Load decodes the result, which viper cannot do strictly: it
// refuses an unknown key, a key given twice or a value of the wrong type,
// naming the key and where its value came from (the file and line, the
// variable, the flag), and records that for Validate's errors, which it
// does not run. Config.File names the file read.
func Resolve(src Sources) (Config, error) {
	file := &fileBytes{}
	v := viper.NewWithOptions(viper.WithDecoderRegistry(file), viper.EnvKeyReplacer(envKey))
	v.SetEnvPrefix(EnvPrefix)
	v.AutomaticEnv()
	path, err := readFile(v, src.File, file)
	if err != nil {
		return Config{}, err
	}
	overrides, err := overridesOf(v, src.Flags)
	if err != nil {
		return Config{}, err
	}
	return Load(Embedded(), path, file.data, overrides...)
}

// readFile has v read named, else the file FileVar names, else DefaultFile
// when it exists, into file, and returns its name ("" when there is none).
// It names the file with SetConfigFile rather than viper's search, which
// would also take streamcast.json, streamcast.toml, … .
func readFile(v *viper.Viper, named string, file *fileBytes) (string, error) {
	path, optional := named, false
	if path == "" {
		path = v.GetString(fileKey)
	}
	if path == "" {
		path, optional = DefaultFile, true
	}
	v.SetConfigFile(path)
	v.SetConfigType("yaml") // whatever the file's extension
	if err := v.ReadInConfig(); err != nil {
		if optional && errors.Is(err, fs.ErrNotExist) {
			return "", nil
		}
		return "", fmt.Errorf("read config: %w", err)
	}
	return path, nil
}

// fileBytes is the codec viper reads the config file with: it keeps the
// file's bytes for Load and gives viper no keys. viper's own YAML decoding
// would lose each key's line and take unknown keys silently; and with no
// keys from the file, a key viper holds was set by the environment or a
// flag, which is what overridesOf asks.
type fileBytes struct{ data []byte }

func (f *fileBytes) Decoder(string) (viper.Decoder, error) { return f, nil }

func (f *fileBytes) Decode(b []byte, _ map[string]any) error {
	f.data = b
	return nil
}

// overridesOf collects, through v, each OverrideKeys key given by a flag
// of fs marked with MarkFlag, else by its environment variable, and the
// keys set by a MarkSwitch flag given. The environment's come first, in
// key order, then the flags': Load lets a later one win, so a flag that
// sets a section (--no-maintain) beats a variable inside it.
func overridesOf(v *viper.Viper, fs *pflag.FlagSet) ([]Override, error) {
	keys := OverrideKeys()
	flags := map[string]*pflag.Flag{} // key → the flag marked as its form
	var env, flagged []Override
	if fs != nil {
		fs.VisitAll(func(f *pflag.Flag) {
			switch ann := f.Annotations[keyAnnotation]; len(ann) {
			case 1: // MarkFlag: [key]
				flags[ann[0]] = f
				_ = v.BindPFlag(ann[0], f) // fails only for a nil flag
			case 2: // MarkSwitch: [key, value]
				if f.Changed && f.Value.String() == "true" {
					flagged = append(flagged, Override{Key: ann[0], Value: ann[1], From: "flag --" + f.Name})
				}
			}
		})
	}
	for key, f := range flags {
		if !slices.Contains(keys, key) {
			return nil, fmt.Errorf("flag --%s is marked as the form of config key %s, which config.Config does not have", f.Name, key) // a mistake in the command tree
		}
	}
	for _, key := range keys {
		if !v.IsSet(key) { // neither its flag given nor its variable set
			continue
		}
		ov := Override{Key: key, Value: overrideValue(v.Get(key)), From: "environment " + EnvVar(key)}
		if f := flags[key]; f != nil && f.Changed {
			ov.From = "flag --" + f.Name
			flagged = append(flagged, ov)
			continue
		}
		env = append(env, ov)
	}
	return append(env, flagged...), nil
}

// overrideValue is a value viper found, as the text an Override takes.
func overrideValue(v any) string {
	switch v := v.(type) {
	case []string:
		return strings.Join(v, ",")
	case string:
		return v
	}
	return fmt.Sprint(v)
}
