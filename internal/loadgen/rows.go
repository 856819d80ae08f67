package loadgen

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/streamcast/streamcast/pkg/schema"
	"github.com/streamcast/streamcast/pkg/wire"
)

// rowTemplate renders rows valid for a schema, the send time in one column.
type rowTemplate struct {
	prefix, suffix []byte // row = prefix + ts + suffix
}

func newRowTemplate(sch *schema.Schema, tsColumn string) (*rowTemplate, error) {
	if sch == nil || sch.IsAny() {
		t := &rowTemplate{prefix: []byte("{" + strconv.Quote(tsColumn) + ":")}
		t.suffix = []byte(`,"bench":"streamcast bench"}`)
		return t, nil
	}
	cols := sch.Columns()
	var b []byte
	t := &rowTemplate{}
	found := false
	b = append(b, '{')
	for i := range cols {
		c := &cols[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = wire.AppendString(b, c.Name)
		b = append(b, ':')
		if c.Name == tsColumn {
			if c.Type == nil || c.Type.ID() != arrow.INT64 {
				return nil, fmt.Errorf("column %q is %v, not int64; pass --ts-column naming an int64 column", tsColumn, c.Type)
			}
			t.prefix = append([]byte(nil), b...)
			b = b[:0]
			found = true
			continue
		}
		var err error
		if b, err = benchValue(b, c); err != nil {
			return nil, err
		}
	}
	b = append(b, '}')
	if !found {
		names := make([]string, len(cols))
		for i := range cols {
			names[i] = cols[i].Name
		}
		return nil, fmt.Errorf("the schema has no column %q to carry the send time (columns: %v); pass --ts-column naming an int64 column", tsColumn, names)
	}
	t.suffix = b
	return t, nil
}

// frame appends a publish frame of n rows stamped ts: a row object when n
// is 1, else a batch array.
func (t *rowTemplate) frame(dst []byte, n int, ts int64) []byte {
	if n > 1 {
		dst = append(dst, '[')
	}
	for i := 0; i < n; i++ {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, t.prefix...)
		dst = strconv.AppendInt(dst, ts, 10)
		dst = append(dst, t.suffix...)
	}
	if n > 1 {
		dst = append(dst, ']')
	}
	return dst
}

// benchValue appends a valid value for column c.
func benchValue(b []byte, c *schema.Column) ([]byte, error) {
	if c.Type == nil {
		return nil, fmt.Errorf("column %q has no type", c.Name)
	}
	switch c.Type.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
		return append(b, "42"...), nil
	case arrow.FLOAT16, arrow.FLOAT32, arrow.FLOAT64:
		return append(b, "1.5"...), nil
	case arrow.BOOL:
		return append(b, "true"...), nil
	case arrow.STRING, arrow.LARGE_STRING:
		return append(b, `"bench"`...), nil
	case arrow.BINARY, arrow.LARGE_BINARY, arrow.FIXED_SIZE_BINARY:
		n := 4
		if fs, ok := c.Type.(*arrow.FixedSizeBinaryType); ok {
			n = fs.ByteWidth
		}
		raw := make([]byte, n)
		for i := range raw {
			raw[i] = byte(i * 37)
		}
		if c.Encoding == schema.EncodingBase64 {
			return wire.AppendString(b, base64.StdEncoding.EncodeToString(raw)), nil
		}
		return wire.AppendString(b, hex.EncodeToString(raw)), nil
	case arrow.STRUCT:
		b = append(b, '{')
		for i := range c.Children {
			if i > 0 {
				b = append(b, ',')
			}
			b = wire.AppendString(b, c.Children[i].Name)
			b = append(b, ':')
			var err error
			if b, err = benchValue(b, &c.Children[i]); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	case arrow.LIST, arrow.LARGE_LIST, arrow.FIXED_SIZE_LIST:
		if len(c.Children) != 1 {
			return nil, fmt.Errorf("list column %q has %d item types", c.Name, len(c.Children))
		}
		n := 1
		if fl, ok := c.Type.(*arrow.FixedSizeListType); ok {
			n = int(fl.Len())
		}
		b = append(b, '[')
		for i := 0; i < n; i++ {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = benchValue(b, &c.Children[0]); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case arrow.MAP:
		if len(c.Children) != 2 {
			return nil, fmt.Errorf("map column %q has %d children", c.Name, len(c.Children))
		}
		b = append(b, `{"k":`...)
		b, err := benchValue(b, &c.Children[1])
		if err != nil {
			return nil, err
		}
		return append(b, '}'), nil
	case arrow.NULL:
		return append(b, "null"...), nil
	}
	if c.Nullable {
		return append(b, "null"...), nil
	}
	return nil, fmt.Errorf("bench cannot generate a value for column %q of type %v", c.Name, c.Type)
}
