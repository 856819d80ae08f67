package logstore

import (
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// HeapProfileEnv names the directory a maintenance child writes a heap
// profile to on each SIGUSR2 (the maintain and replicate commands);
// unset, it writes none. serve's children inherit it.
const HeapProfileEnv = "STREAMCAST_HEAP_PROFILE_DIR"

// Every process of the streamcast binary runs the initialisers of every
// package it links before main: iceberg-go's substrait function registry
// alone allocates about 31 MB in half a million objects there. The few MB
// that stay live are scattered among that garbage, so an idle child keeps
// about twice their size in heap pages for its whole life. Collecting more
// often while the initialisers run packs the survivors into fewer pages
// (about 2 MB less heap in use per child, measured by internal/testkit/idlecost);
// past them, the child collects as any process does (AfterInit).
const (
	// initGOGC is the GOGC a child's package initialisers run with.
	initGOGC = "25"
	// afterInitEnv names the GOGC a child returns to in AfterInit; serve
	// sets it beside GOGC, so a GOGC of the operator's own, which serve's
	// children inherit, is never changed.
	afterInitEnv = "STREAMCAST_CHILD_GOGC"
	// defaultGOGC is the runtime's own GOGC.
	defaultGOGC = "100"
)

// ChildEnv returns environ, serve's environment, as a maintenance child
// runs with it: credentials reach children only this way, so all of it is
// kept. Two settings for the child's Go runtime are added, each only where
// environ does not set it already:
//
//   - GOGC=25 while the child's package initialisers run (see AfterInit),
//     when environ sets no GOGC;
//   - memprofilerate=0 in GODEBUG, when no heap profile is asked for
//     (HeapProfileEnv): the memory profiler is on in every Go process by
//     default and keeps a 1.4 MB hash table of its samples that a child
//     nobody profiles never reads.
func ChildEnv(environ []string) []string {
	env := append([]string(nil), environ...)
	get := func(key string) (string, bool) {
		v, ok := "", false
		for _, kv := range environ {
			if k, val, found := strings.Cut(kv, "="); found && k == key {
				v, ok = val, true // the last one is the one a process sees
			}
		}
		return v, ok
	}
	if _, ok := get("GOGC"); !ok {
		env = append(env, "GOGC="+initGOGC, afterInitEnv+"="+defaultGOGC)
	}
	if dir, _ := get(HeapProfileEnv); dir == "" {
		debugs, _ := get("GODEBUG")
		if !strings.Contains(","+debugs, ",memprofilerate=") {
			if debugs != "" {
				debugs += ","
			}
			// exec keeps the last of duplicate keys: this one.
			env = append(env, "GODEBUG="+debugs+"memprofilerate=0")
		}
	}
	return env
}

// AfterInit returns the collector to the GOGC serve asked for once a
// child's package initialisers have run (ChildEnv); a maintenance command
// calls it first. Outside a child started by serve it does nothing.
func AfterInit() {
	v := os.Getenv(afterInitEnv)
	if v == "" {
		return
	}
	if n, err := strconv.Atoi(v); err == nil {
		debug.SetGCPercent(n)
	}
}
