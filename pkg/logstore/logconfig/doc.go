// Package logconfig is a log's configuration: the Config that Create
// stores in buffer.db and Open reads back, its defaults, the policy
// fields a maintenance process may override, and its checks against the
// log's schema. package logstore names it as logstore.Config.
//
// It sits below pkg/logstore and imports only schema, parquetfile and
// warehouse; it opens no file and keeps no state.
package logconfig
