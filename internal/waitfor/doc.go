// Package waitfor bounds waits: on a sync.WaitGroup, for shutdowns that
// must not hang on a peer that never lets go, and a sleep that a context
// cuts short, for retry loops. It imports nothing of the module, so every
// layer may use it, and holds no state. It must never be used to abandon a
// group nobody is stopping: on a timeout, Group's waiting goroutine lives
// on until the group is done.
package waitfor
