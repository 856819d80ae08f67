// Package backlog owns the frames a connection has yet to write, a
// subscriber's backlog among them: Queue, the ring of complete frames a
// connection's writer takes its writes from (its length is what a
// subscriber's max_backlog bounds, I5), and Reclaimer, which returns the
// memory of queues let go (a mass drop of stalled subscribers) to the OS.
//
// It sits below pkg/broker: broker imports it, and it must never import
// broker or its other sub-packages. It never writes to a socket, never
// decides when a subscriber is dropped (the caller checks Len against its
// bound) and never copies a frame: the bytes it holds are shared with other
// connections (I4).
package backlog
