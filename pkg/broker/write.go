package broker

import (
	"encoding/json"
	"net/http"
)

// writeStats answers GET /stats with doc. With everywhere (the principal holds
// stats on "*") the document goes whole; otherwise only the streams
// allowed names, and none of the process-wide figures (process, children).
// The caller decides who may see what; writeStats only shapes the answer.
func writeStats(w http.ResponseWriter, doc Stats, everywhere bool, allowed func(stream string) bool) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if everywhere {
		_ = enc.Encode(doc)
		return
	}
	shown := doc.Streams[:0]
	for _, ss := range doc.Streams {
		if allowed(ss.Name) {
			shown = append(shown, ss)
		}
	}
	_ = enc.Encode(streamsOnly{ServedAt: doc.ServedAt, Streams: shown})
}

// streamsOnly is /stats for a principal without stats on "*": the
// document's shape without its process-wide parts.
type streamsOnly struct {
	ServedAt float64       `json:"served_at"`
	Streams  []StreamStats `json:"streams"`
}

// writeHealth answers GET /health: 200 with {"status":"ready"} when status
// is "ready", 503 with the status ("starting", "stopping") otherwise.
func writeHealth(w http.ResponseWriter, status string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if status != "ready" {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_, _ = w.Write([]byte("{\"status\":\"" + status + "\"}\n"))
}
