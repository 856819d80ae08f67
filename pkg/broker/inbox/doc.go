// Package inbox is the bounded queue between a durable stream's publisher
// read loops and its committer: publishers put frames' jobs in, waiting
// while the stream holds max_inbound rows, and the committer takes them,
// one job or a group of them, and gives their room back once they are
// committed (docs/design.md I5: a publisher waits for room, never a
// subscriber).
//
// It sits below pkg/broker and imports nothing of the module; it is
// generic over the job type and never looks inside a job. It owns no
// goroutine: the caller's publishers and committer block in it.
package inbox
