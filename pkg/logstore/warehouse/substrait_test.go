package warehouse

import (
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table/substrait"
)

// TestIcebergGoConvertsEveryExpressionItUses: iceberg-go turns a scan's
// row filter into Substrait with the functions of the extension files
// streamcast's build keeps (internal/third_party/substrait). Each kind of
// predicate iceberg-go converts must convert: a file it needs and the
// build left out fails here, not in a user's scan.
func TestIcebergGoConvertsEveryExpressionItUses(t *testing.T) {
	schema := iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "n", Type: iceberg.PrimitiveTypes.Int64, Required: false},
		iceberg.NestedField{ID: 2, Name: "s", Type: iceberg.PrimitiveTypes.String, Required: false},
		iceberg.NestedField{ID: 3, Name: "f", Type: iceberg.PrimitiveTypes.Float64, Required: false},
	)
	n, s, f := iceberg.Reference("n"), iceberg.Reference("s"), iceberg.Reference("f")
	for name, e := range map[string]iceberg.BooleanExpression{
		"equal":         iceberg.EqualTo(n, int64(1)),
		"not equal":     iceberg.NotEqualTo(n, int64(1)),
		"greater":       iceberg.GreaterThan(n, int64(1)),
		"greater equal": iceberg.GreaterThanEqual(n, int64(1)),
		"less":          iceberg.LessThan(n, int64(1)),
		"less equal":    iceberg.LessThanEqual(n, int64(1)),
		"is null":       iceberg.IsNull(s),
		"not null":      iceberg.NotNull(s),
		"is nan":        iceberg.IsNaN(f),
		"not nan":       iceberg.NotNaN(f),
		"starts with":   iceberg.StartsWith(s, "a"),
		"not starts":    iceberg.NotStartsWith(s, "a"),
		"in":            iceberg.IsIn(n, int64(1), int64(2), int64(3)),
		"not in":        iceberg.NotIn(n, int64(1), int64(2), int64(3)),
		"and, or, not":  iceberg.NewNot(iceberg.NewOr(iceberg.NewAnd(iceberg.EqualTo(n, int64(1)), iceberg.IsNull(s)), iceberg.LessThan(f, 2.5))),
	} {
		bound, err := iceberg.BindExpr(schema, e, true)
		if err != nil {
			t.Fatalf("%s: bind: %v", name, err)
		}
		if _, _, err := substrait.ConvertExpr(schema, bound, true); err != nil {
			t.Errorf("%s: iceberg-go cannot convert it with the extension files this build keeps: %v", name, err)
		}
	}
}
