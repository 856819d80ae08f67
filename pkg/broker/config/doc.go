// Package config is streamcast's configuration: the one typed Config that
// `streamcast serve` runs with and `streamcast config` prints, its
// defaults, how it is read (a YAML file, STREAMCAST_* variables and flags,
// through internal/conf) and Validate, whose errors name the key and where
// its value came from. It also derives from a Config what serve stores in
// each log it creates (LogSettings) and checks what an existing log stores
// against it (CheckStored): a log's published location is its identity (I8).
//
// It sits below pkg/broker: broker imports it, and it must never import
// broker or supervise. It opens no log and starts nothing; the only files
// it reads are the config's schema_file entries, and it never accepts a
// credential as a config value: the auth: section holds bcrypt hashes of
// passwords (printed redacted), never a password.
package config
