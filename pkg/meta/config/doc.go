// Package config owns streamcast's whole configuration: the typed Config
// every command runs with, its defaults beside the struct and each
// section's type (Default, Embedded), its layering through viper in
// Resolve (Embedded, then the config file, the STREAMCAST_* variables and
// the flags marked with MarkFlag and MarkSwitch, each overriding the one
// before), and the strict decoder viper lacks (decode.go): it refuses an
// unknown key, a key given twice or a value of the wrong type, naming the
// key and where its value came from (file and line, variable, flag), and
// renders a Config with its secrets redacted.
//
// It also derives from a Config what serve stores in each log it creates
// (LogSettings) and checks what an existing log stores against it
// (CheckStored): a log's published location is its identity (I8); and it
// says what a reload cannot apply to a running server (Stream.Change,
// Config.RestartOnly).
//
// It must never import pkg/broker or cmd, and nothing else may read the
// config file or build a config of its own. It opens no log and starts
// nothing; besides the config file it reads only the schema_file entries
// and the tls: files (to check that they load). It never accepts a
// credential as a config value: the auth: section holds bcrypt hashes of
// passwords (printed redacted), never a password.
//
// It is its own package because the configuration is an API of its own
// that every command and the server read (Config, Resolve, Compile), built
// on viper, yaml and the flag set, none of which the stream metadata
// needs: it reads meta's layout and names, and meta never reads it.
package config
