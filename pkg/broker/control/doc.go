// Package control is the control API (/control/v1): streams declared,
// started, stopped, migrated and retired over HTTP while the server runs.
// It owns the registry (a SQLite file made once by `streamcast control
// init`, never by serve) holding each registered stream's declaration,
// desired state, revision and bound identity, every operation a change
// made (a finished one for OperationRetention) and every idempotency
// receipt (for ReceiptRetention; a no-op records only its receipt). A
// mutation, its operation and its receipt commit in one transaction before
// the 202; the controller's one worker then runs operations in order
// through the Runtime the server gives it. A mutation's headers
// (Content-Type, Idempotency-Key, If-Match, If-None-Match) and a list
// page's cursor are checked before its body, each refusal with the status
// and code the API answers. A stream name is refused when it differs only
// in case from another (meta.Fold), and a list page and its cursor name
// only streams the caller may control. Client is the API's Go client, which
// `streamcast streams` uses.
//
// It never recreates a bound stream whose log is missing (I8), never
// answers with a path, a credential or a row, and never touches a stream's
// data path: connections and commits never wait on it. It is its own
// package because the API reads alone: pkg/broker implements its Runtime
// (start, stop, migrate a stream) and never the other way round, so control
// must never import broker.
package control
