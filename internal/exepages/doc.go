// Package exepages gives back, from one process, the resident pages of its
// own executable's read-only segments: the machine code and the constant
// data (docs/design.md §4.13).
//
// Every process of the streamcast binary maps the same file, and the pages
// a process has touched count in its resident set until it exits. A
// maintenance child touches some 50 MB of code and tables while its
// package initialisers and its first pass over every log run, and an idle
// one afterwards needs a few MB of them. Release drops this process's
// mappings of those pages (madvise MADV_DONTNEED): the pages stay in the
// kernel's page cache, shared and reclaimable, and a page needed again is
// mapped back by a minor fault, from memory. Only private mappings that
// are not writable are touched, so no byte the process wrote is lost.
//
// It imports nothing of the module, and it never changes what the process
// computes: only how many of the executable's pages it holds mapped. It is
// its own package because two layers call it, logstore's maintenance
// children and cmd's replicate, and a base helper that imports nothing
// keeps its one system call (and its build-tagged files) out of both.
package exepages
