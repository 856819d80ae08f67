// Package sqlview runs SQL over a stream's history: a SQLite (modernc)
// virtual table named log whose rows come from Arrow record batches that a
// Table, usually a *history.Reader, scans from the published Parquet files
// and the tail.
//
// SQLite's planner tells the table which columns a query uses and which
// comparisons it makes (=, <, <=, >, >=, and IN one value at a time); the
// table asks the Table for only those columns and passes the comparisons
// on as history.Bounds, which let it skip logs, files and row groups whose
// statistics prove them empty. The table never tells SQLite that it applied
// a comparison (it never sets omit), so SQLite checks every row it is
// given: a query's result never depends on what was skipped, only its cost
// does (I6, docs/design.md: nothing is silently skipped). An ORDER BY or
// GROUP BY on plain columns is answered in order by the table itself (see
// order.go), so SQLite does not sort every row.
//
// It never writes: not the stream, not a file. The SQLite database it opens
// lives in memory and dies with the View. It is its own package because the
// virtual table is an API of its own (a View over any Table), built on
// modernc's vtab, which nothing else in the product needs.
package sqlview
