// Package wiretest holds the end-to-end tests of the wire client against
// the real broker on 127.0.0.1: the broker's own suite covers the server's
// side, these cover what the client makes of it, through the client's
// exported API only, as any program uses it. It has tests only; nothing
// imports it, and it must never hold code a product package could import.
//
// It is its own package because the broker imports wire: wire's internal
// tests cannot import the broker, and keeping these apart leaves wire's
// test binary about the protocol alone, without the broker's storage stack.
package wiretest
