// Package certs holds the server's TLS certificate (the tls: section): the
// configuration every new handshake gets, loaded at start, reloaded when
// asked (SIGHUP, a config reload) and when its files change on disk. A pair
// that does not load is refused and logged, and the one loaded before keeps
// serving; a connection already open keeps the keys it agreed.
//
// It owns one goroutine only while its owner runs Watch, and stops it when
// told. It must never listen, accept or read a request: the broker builds
// the listener and names a client from its certificate (PrincipalFromTLS).
package certs
