package wire

// Publishing over plain HTTP: POST /<stream> with the rows as the body.
// The server answers each request with the reply a WebSocket publisher
// gets for one frame, as the response body, once the rows are on disk.

// Headers of an HTTP publish request.
const (
	// PublisherHeader names the exactly-once publisher id of an HTTP
	// publish (what &publisher=ID is to a WebSocket publisher).
	PublisherHeader = "Streamcast-Publisher"
	// SeqHeader is the seq of the first row of an HTTP publish by an
	// exactly-once publisher (the seq of a WebSocket [seq, rows] frame).
	SeqHeader = "Streamcast-Seq"
)

// Content types an HTTP publish body may have.
const (
	// ContentTypeJSON is a body of one row (a JSON object) or a non-empty
	// JSON array of rows: a WebSocket publish frame.
	ContentTypeJSON = "application/json"
	// ContentTypeNDJSON is a body of one row per line, blank lines skipped.
	ContentTypeNDJSON = "application/x-ndjson"
)

// Values of "error" in an HTTP publish answer that a WebSocket publisher
// meets as a close instead.
const (
	// ReplyTooBig: the body is over limits.max_message_bytes (413).
	ReplyTooBig = "too_big"
	// ReplyTooManyRows: the body holds more rows than limits.max_inbound (413).
	ReplyTooManyRows = "too_many_rows"
	// ReplyPublisherBusy: another connection or request publishes under the
	// same exactly-once publisher id right now (409).
	ReplyPublisherBusy = "publisher_busy"
	// ReplyUnsupportedType: the body is neither JSON nor NDJSON (415).
	ReplyUnsupportedType = "unsupported_media_type"
)
