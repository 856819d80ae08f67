package txbox

// inboxDDL returns the inbox's tables for DDL. The inbox side owns this
// file; until it lands the outbox's tables are all there is.
func inboxDDL(d Dialect) []string { return nil }
