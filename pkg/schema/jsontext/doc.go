// Package jsontext holds the canonical text forms of JSON scalars and the
// small JSON lexing helpers that package schema's row decoder, Arrow
// conversions and where-filters share. schema's Decode and AppendJSON both
// write scalars only through the Append* functions here, which is what
// makes live and replayed rows byte-identical (docs/design.md I4). It reads
// and writes bytes only; it knows nothing of schemas or columns, and
// imports nothing of the module. It is its own package, below schema,
// because the canonical text of a scalar is an API that reads alone, with
// no column type in it.
package jsontext
