// Command typecheck type-checks the streamcast command for another
// platform, from source, without compiling anything. `.ci/run` runs it for
// the release targets in goreleaser.yaml that CI does not build, so a
// Linux-only call in a file every platform compiles (flock, SIGUSR1,
// getrusage and TCGETS are such calls on darwin and windows) fails CI by
// name.
//
// Usage, from the repository root, with the target in the environment:
//
//	go build -o .tools/bin/typecheck ./internal/typecheck
//	GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 .tools/bin/typecheck .
//
// One `go list -deps -json` resolves every package and file as `go build`
// would for that target; then each package is type-checked in dependency
// order. The module's own packages are checked whole; the standard
// library's and the dependencies' function bodies are skipped, since only
// their declarations can break our code. It catches what the compiler's
// type checker catches, which is how a per-OS file goes wrong; it does not
// link. A cold `go build` of the same tree for another platform costs about
// two minutes of a 2-core box; this takes seconds.
//
// It imports nothing of the module and is imported by nothing.
package main
