package ndjson

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/streamcast/streamcast/pkg/schema"
	"github.com/streamcast/streamcast/pkg/wire"
)

// explainWhere gives the whole explanation of a --where the server
// refused, or nil when err is no such refusal or none can be had. The
// server's 4400 close reason must fit a close frame, which cuts its detail
// to 80 characters ("… would matc…"), so the filter is compiled here, with
// the code the server runs (schema.CompileFilter), against the schema
// that a plain live subscription's greeting carries. A filter the schema
// accepts was refused for something else (limits.max_where_bytes), which
// the server's own words say in full.
func explainWhere(ctx context.Context, rawURL string, dial wire.DialOptions, where json.RawMessage, err error) error {
	var br *wire.BadRequest
	if len(where) == 0 || !errors.As(err, &br) || !strings.Contains(br.Detail, "where") {
		return nil
	}
	sub, serr := wire.Subscribe(ctx, rawURL, wire.SubscribeOptions{DialOptions: dial})
	if serr != nil {
		return nil
	}
	defer sub.Close()
	sch, serr := sub.Schema()
	if serr != nil {
		return nil
	}
	if sch == nil {
		sch = schema.Any()
	}
	_, cerr := sch.CompileFilter(where)
	if cerr == nil {
		return nil
	}
	msg := "--where " + string(where) + ": " + cerr.Error()
	if at, _, ok := strings.Cut(br.Detail, ": "); ok && strings.HasPrefix(at, "migrated at offset") {
		msg = "--where " + string(where) + " does not fit the stream's schema since it " + at + ": " + cerr.Error()
	}
	return &TailError{Msg: msg, Err: err}
}
