package logstore

import (
	"testing"

	"github.com/apache/iceberg-go"
)

// TestBoundJSONTakesOnlyExactBounds: a bound becomes a record's min or max
// only when Iceberg stores it exactly; a string of 16 characters or more
// may be truncated (and its upper bound rounded up), so it is dropped.
func TestBoundJSONTakesOnlyExactBounds(t *testing.T) {
	for _, c := range []struct {
		typ  iceberg.Type
		in   []byte
		want string // "" = no bound
	}{
		{iceberg.PrimitiveTypes.Int64, []byte{0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, "-2"},
		{iceberg.PrimitiveTypes.Int32, []byte{7, 0, 0, 0}, "7"},
		{iceberg.PrimitiveTypes.Int64, []byte{7, 0, 0, 0}, ""},
		{iceberg.PrimitiveTypes.Bool, []byte{1}, "true"},
		{iceberg.PrimitiveTypes.String, []byte(`a"é`), `"a\"é"`},
		{iceberg.PrimitiveTypes.String, []byte("fifteen chars.."), `"fifteen chars.."`},
		{iceberg.PrimitiveTypes.String, []byte("sixteen chars..."), ""},
		{iceberg.PrimitiveTypes.String, nil, ""},
		{iceberg.PrimitiveTypes.Float64, []byte{0, 0, 0, 0, 0, 0, 0xf0, 0x3f}, ""},
	} {
		if got := string(boundJSON(c.typ, c.in)); got != c.want {
			t.Errorf("boundJSON(%s, %q) = %q, want %q", c.typ, c.in, got, c.want)
		}
	}
}
