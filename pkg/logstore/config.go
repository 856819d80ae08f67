package logstore

// Names of the columns every sealed file carries before the declared ones,
// and of the single column that holds rows of a stream without a schema.
const (
	OffsetColumn = "streamcast_offset"
	TSColumn     = "streamcast_ts"
	RowColumn    = "streamcast_row"
)
