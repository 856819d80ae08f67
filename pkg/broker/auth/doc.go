// Package auth decides who a request is and what it may do: it checks HTTP
// Basic credentials against the bcrypt hashes of the config's auth: section
// (caching a verification briefly, keyed by a keyed hash of the
// credentials, never by the password), answers whether a principal holds a
// grant of an action on a stream, and slows down an address that keeps
// failing. The broker calls it before any stream lookup, query parsing or
// WebSocket upgrade (docs/design.md §3.2).
//
// It owns no goroutine and no listener, and it must never log, return or
// store a password or an Authorization header: errors and reports carry
// user names only when they name a configured user. It is its own package
// because who a request is and what it may do is a decision with a small
// API that reads alone, asked by the broker's entry and by the control API
// (pkg/broker/control), which must not import the broker.
package auth
