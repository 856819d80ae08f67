// Package substrait is github.com/substrait-io/substrait v0.87.0 with its
// extension catalogue narrowed to the files iceberg-go's expression
// conversion names (boolean, comparison and string functions, and the
// type files they rest on); go.mod's replace directive puts it in place
// of the original.
//
// substrait-go parses every file of the catalogue when a program starts,
// because iceberg-go's table/substrait package asks for the default
// collection in a package variable: with the whole catalogue that was
// 73 ms of every streamcast process's start (1.5 MB of YAML, 32 MB
// allocated), before main, in every command and in each of serve's
// maintenance children; with these files it is about a third of that.
// streamcast converts no expression (it scans tables without row
// filters), and iceberg-go's conversion needs only these files;
// TestIcebergGoConvertsEveryExpressionItUses in pkg/logstore/warehouse
// keeps that true. The files are Apache-2.0 (LICENSE), unchanged.
package substrait

import "embed"

//go:embed extensions/*
var substraitExtensionsFS embed.FS

// GetSubstraitFS returns the extension files.
func GetSubstraitFS() embed.FS {
	return substraitExtensionsFS
}

// GetSubstraitExtensionsFS returns the extension files.
func GetSubstraitExtensionsFS() embed.FS {
	return substraitExtensionsFS
}

// GetSubstraitTestsFS returns no files: the original's test cases are
// for substrait-go's own tests, which this build never runs.
func GetSubstraitTestsFS() embed.FS {
	return embed.FS{}
}
