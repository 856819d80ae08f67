// Package rusage reads this process's CPU time and peak resident set size
// from getrusage(2), in one place for the module: the server's /stats
// reports them, and so does the load generator for itself.
//
// It is a leaf utility: it imports nothing of the module, holds no state,
// and reports zeros (never an error or a guess) where the call does not
// exist or fails.
package rusage
