// Package control is the control API (/control/v1): streams declared,
// started, stopped, migrated and retired over HTTP while the server runs.
// It owns the registry (a SQLite file made once by `streamcast control
// init`, never by serve) holding each registered stream's declaration,
// desired state, revision and bound identity, every operation a change
// made (a finished one for OperationRetention) and every idempotency
// receipt (for ReceiptRetention; a no-op records only its receipt). A mutation, its operation and its
// receipt commit in one transaction before the 202; the controller's one
// worker then runs operations in order through the Runtime the server
// gives it. A stream name is refused when it differs only in case from
// another (meta.Fold), and a list page and its cursor name only streams
// the caller may control.
// It never recreates a bound stream whose log is missing (I8), never
// answers with a path, a credential or a row, and never touches a
// stream's data path: connections and commits never wait on it.
package control
