// Package config is streamcast's configuration: the one typed Config that
// `streamcast serve` runs with and `streamcast config` prints, its
// defaults, how it is read (a YAML file, STREAMCAST_* variables and flags,
// through internal/conf) and Validate, whose errors name the key and where
// its value came from. It also derives from a Config what serve stores in
// each log it creates (LogSettings) and checks what an existing log stores
// against it (CheckStored): a log's published location is its identity (I8).
// It says what a reload cannot apply to a running server: a changed stream
// declaration (Stream.Change) and the sections that wait for a restart
// (Config.RestartOnly).
//
// It sits below pkg/broker: broker imports it, and it must never import
// broker or supervise. It opens no log and starts nothing; the only files
// it reads are the config's schema_file entries and the tls: section's
// certificate, key and client CA files (to check that they load), and it
// never accepts a credential as a config value: the auth: section holds
// bcrypt hashes of passwords (printed redacted), never a password.
package config
