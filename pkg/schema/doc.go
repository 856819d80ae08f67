// Package schema owns a stream's columns: it compiles a JSON Schema into
// Arrow columns (and back, for the greeting), decodes and validates rows into
// their one canonical JSON encoding, converts canonical rows to and from Arrow,
// and evaluates where= filters.
//
// It carries I4 (one encoding): a row's canonical bytes, appended to Arrow and
// encoded back with AppendJSON, are byte-identical to what Decode produced, and
// Decode of canonical bytes returns them unchanged. It carries I6 (refuse,
// never guess): a schema, row or filter that cannot be stored or served
// exactly is refused with an error naming the property or column.
//
// The package knows nothing of the wire protocol, storage or the server: it
// takes bytes and Arrow arrays and returns bytes, values and errors.
//
// The row decoder (row.go), the Arrow conversions (arrow.go) and the
// filters (filter.go) stay in this one package: each switches over the same
// column types, and I4 holds only while they agree type by type, so the
// round trip the property test checks never crosses a package line. What
// knows no column type, the JSON lexing and the canonical text of strings,
// integers and floats, is package jsontext below it.
package schema
