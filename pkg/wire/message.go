package wire

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/streamcast/streamcast/pkg/schema"
)

// Message is one data frame of a subscription.
type Message struct {
	Offset int64  // the row's offset; Null on a live-only stream
	TS     int64  // the server's commit stamp, µs since the epoch (UTC); Null when the log predates stamps
	Row    []byte // the row as canonical JSON, columns in schema order; valid until the next Recv

	frame []byte // the whole frame as received; Row points into it
	dec   *decoder
}

// Frame returns the data frame [offset,ts,row] exactly as the server sent
// it. Like Row, it is valid until the next Recv.
func (m *Message) Frame() []byte { return m.frame }

// Time returns TS as a time (the zero time when TS is Null).
func (m *Message) Time() time.Time {
	if m.TS == Null {
		return time.Time{}
	}
	return time.UnixMicro(m.TS).UTC()
}

// Unmarshal decodes the row into v with encoding/json.
func (m *Message) Unmarshal(v any) error {
	if err := json.Unmarshal(m.Row, v); err != nil {
		return fmt.Errorf("row at offset %d: %w", m.Offset, err)
	}
	return nil
}

// Decode returns the row as a map with values typed by the stream's schema
// (from the greeting): integer columns as int64, number columns as float64,
// binary columns as []byte (decoded from base16/base64), structs and maps as
// map[string]any, lists as []any, nulls as nil. Without a schema, integral
// numbers are int64 and the others float64.
func (m *Message) Decode() (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(m.Row))
	d.UseNumber()
	var row map[string]any
	if err := d.Decode(&row); err != nil {
		return nil, fmt.Errorf("row at offset %s is not a JSON object: %w", num(m.Offset), err)
	}
	var cols []schema.Column
	if m.dec != nil {
		sch, err := m.dec.compiled()
		if err != nil {
			return nil, err
		}
		if sch != nil {
			cols = sch.Columns()
		}
	}
	if cols == nil {
		for k, v := range row {
			row[k] = plainValue(v)
		}
		return row, nil
	}
	byName := make(map[string]*schema.Column, len(cols))
	for i := range cols {
		byName[cols[i].Name] = &cols[i]
	}
	for k, v := range row {
		c, ok := byName[k]
		if !ok {
			row[k] = plainValue(v)
			continue
		}
		tv, err := typedValue(v, c)
		if err != nil {
			return nil, fmt.Errorf("row at offset %s, column %s: %w", num(m.Offset), k, err)
		}
		row[k] = tv
	}
	return row, nil
}

// decoder compiles the greeting's schema once, on the first Decode.
type decoder struct {
	schema json.RawMessage
	once   sync.Once
	sch    *schema.Schema
	err    error
}

func (d *decoder) compiled() (*schema.Schema, error) {
	d.once.Do(func() {
		if len(d.schema) == 0 {
			return
		}
		d.sch, d.err = schema.Compile(d.schema)
		if d.err != nil {
			d.err = fmt.Errorf("the greeting's schema does not compile: %w", d.err)
		}
	})
	return d.sch, d.err
}

// Schema returns the stream's schema compiled from the greeting, or nil when
// the stream declares none.
func (s *Subscription) Schema() (*schema.Schema, error) { return s.dec.compiled() }

func plainValue(v any) any {
	switch v := v.(type) {
	case json.Number:
		if !strings.ContainsAny(string(v), ".eE") {
			if n, err := v.Int64(); err == nil {
				return n
			}
		}
		f, _ := v.Float64()
		return f
	case map[string]any:
		for k, e := range v {
			v[k] = plainValue(e)
		}
		return v
	case []any:
		for i, e := range v {
			v[i] = plainValue(e)
		}
		return v
	default:
		return v
	}
}

func typedValue(v any, c *schema.Column) (any, error) {
	if v == nil || c.Type == nil {
		return plainValue(v), nil
	}
	switch c.Type.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
		n, ok := v.(json.Number)
		if !ok {
			return nil, fmt.Errorf("%T is not an integer", v)
		}
		return n.Int64()
	case arrow.FLOAT16, arrow.FLOAT32, arrow.FLOAT64:
		n, ok := v.(json.Number)
		if !ok {
			return nil, fmt.Errorf("%T is not a number", v)
		}
		return n.Float64()
	case arrow.BINARY, arrow.LARGE_BINARY, arrow.FIXED_SIZE_BINARY:
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("%T is not binary text", v)
		}
		switch c.Encoding {
		case schema.EncodingBase16:
			return hex.DecodeString(s)
		case schema.EncodingBase64:
			return base64.StdEncoding.DecodeString(s)
		}
		return s, nil
	case arrow.STRUCT:
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%T is not an object", v)
		}
		for k, e := range obj {
			var child *schema.Column
			for i := range c.Children {
				if c.Children[i].Name == k {
					child = &c.Children[i]
				}
			}
			if child == nil {
				obj[k] = plainValue(e)
				continue
			}
			tv, err := typedValue(e, child)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			obj[k] = tv
		}
		return obj, nil
	case arrow.LIST, arrow.LARGE_LIST, arrow.FIXED_SIZE_LIST:
		list, ok := v.([]any)
		if !ok || len(c.Children) != 1 {
			return plainValue(v), nil
		}
		for i, e := range list {
			tv, err := typedValue(e, &c.Children[0])
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			list[i] = tv
		}
		return list, nil
	case arrow.MAP:
		obj, ok := v.(map[string]any)
		if !ok || len(c.Children) != 2 {
			return plainValue(v), nil
		}
		for k, e := range obj {
			tv, err := typedValue(e, &c.Children[1])
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			obj[k] = tv
		}
		return obj, nil
	default:
		return plainValue(v), nil
	}
}
