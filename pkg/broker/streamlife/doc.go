// Package streamlife keeps what starting and stopping one served stream
// takes, beside its log and its fan-out set: the connections attached to
// it, whether it is stopping or fenced for a migration, the generation of
// its log, the 1001 reason its connections get, and the two groups a stop
// waits for (the connections' handlers and the publisher read loops).
//
// It sits below pkg/broker and imports none of broker's sub-packages; it is
// generic over the connection type, so it knows nothing of WebSocket. It
// owns no goroutine and never closes, aborts or writes to a connection:
// it hands the connections to the caller, which does.
package streamlife
