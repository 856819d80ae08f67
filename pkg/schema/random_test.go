package schema

import (
	"encoding/base64"
	"encoding/hex"
	"math"
	"math/rand"
	"strconv"
	"strings"

	"github.com/streamcast/streamcast/pkg/schema/jsontext"
)

// tnode describes a random schema for the property tests: the test renders
// it as JSON Schema and produces rows for it as a publisher might write them.
type tnode struct {
	kind     kind
	nullable bool
	required bool
	enc      Encoding
	size     int
	names    []string
	fields   []*tnode
	elem     *tnode
}

type gen struct{ rng *rand.Rand }

func (g *gen) schema() *tnode {
	root := &tnode{kind: kStruct}
	n := 1 + g.rng.Intn(6)
	for i := 0; i < n; i++ {
		root.names = append(root.names, g.name(i))
		root.fields = append(root.fields, g.field(0))
	}
	return root
}

func (g *gen) name(i int) string {
	names := []string{"a", "price", "é", "with space", `q"uote`, "back\\slash", "tab\t", "x.y", "[0]", "日本"}
	return names[g.rng.Intn(len(names))] + strconv.Itoa(i)
}

func (g *gen) field(depth int) *tnode {
	n := g.node(depth)
	switch g.rng.Intn(3) {
	case 0:
		n.required = true // plain or nullable
	case 1:
		n.required, n.nullable = true, false
	default:
		n.required, n.nullable = false, true
	}
	return n
}

func (g *gen) node(depth int) *tnode {
	k := kind(1 + g.rng.Intn(int(kMap)))
	if depth >= 3 && !k.scalar() {
		k = kString
	}
	n := &tnode{kind: k, nullable: g.rng.Intn(3) == 0}
	switch k {
	case kBinary, kFixed:
		n.enc = EncodingBase16
		if g.rng.Intn(2) == 0 {
			n.enc = EncodingBase64
		}
		n.size = 1 + g.rng.Intn(5)
	case kStruct:
		for i := 0; i < 1+g.rng.Intn(3); i++ {
			n.names = append(n.names, g.name(i))
			n.fields = append(n.fields, g.field(depth+1))
		}
	case kList, kMap:
		n.elem = g.node(depth + 1)
	}
	return n
}

func (n *tnode) doc() string {
	var b strings.Builder
	n.write(&b)
	return b.String()
}

func quote(s string) string { return string(jsontext.AppendString(nil, []byte(s))) }

func (n *tnode) write(b *strings.Builder) {
	typ := quote(n.kind.typeWord())
	if n.nullable {
		typ = "[" + typ + `,"null"]`
	}
	b.WriteString(`{"type":` + typ)
	switch n.kind {
	case kInt32:
		b.WriteString(`,"format":"int32"`)
	case kFloat32:
		b.WriteString(`,"format":"float"`)
	case kBinary:
		b.WriteString(`,"contentEncoding":"` + n.enc.String() + `"`)
	case kFixed:
		b.WriteString(`,"contentEncoding":"` + n.enc.String() + `","format":"bytes` + strconv.Itoa(n.size) + `"`)
	case kStruct:
		b.WriteString(`,"properties":{`)
		var req []string
		for i, f := range n.fields {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(quote(n.names[i]) + ":")
			f.write(b)
			if f.required {
				req = append(req, quote(n.names[i]))
			}
		}
		b.WriteString("}")
		if len(req) > 0 {
			b.WriteString(`,"required":[` + strings.Join(req, ",") + "]")
		}
	case kList:
		b.WriteString(`,"items":`)
		n.elem.write(b)
	case kMap:
		b.WriteString(`,"additionalProperties":`)
		n.elem.write(b)
	}
	b.WriteString("}")
}

func (g *gen) ws() string {
	if g.rng.Intn(4) != 0 {
		return ""
	}
	return []string{" ", "\n", "\t ", "\r\n  "}[g.rng.Intn(4)]
}

// row writes a random valid row for the root struct.
func (g *gen) row(root *tnode) string {
	var b strings.Builder
	g.object(&b, root)
	return g.ws() + b.String() + g.ws()
}

func (g *gen) object(b *strings.Builder, n *tnode) {
	order := g.rng.Perm(len(n.fields))
	if g.rng.Intn(2) == 0 { // mostly schema order, the common case
		for i := range order {
			order[i] = i
		}
	}
	b.WriteString("{" + g.ws())
	first := true
	for _, i := range order {
		f := n.fields[i]
		if !f.required && g.rng.Intn(3) == 0 {
			continue // absent: written as null
		}
		if !first {
			b.WriteString("," + g.ws())
		}
		first = false
		b.WriteString(g.str(n.names[i]) + g.ws() + ":" + g.ws())
		g.value(b, f)
		b.WriteString(g.ws())
	}
	b.WriteString("}")
}

func (g *gen) value(b *strings.Builder, n *tnode) {
	if n.nullable && g.rng.Intn(4) == 0 {
		b.WriteString("null")
		return
	}
	r := g.rng
	switch n.kind {
	case kBool:
		b.WriteString([]string{"true", "false"}[r.Intn(2)])
	case kInt64, kInt32:
		var v int64
		switch r.Intn(4) {
		case 0:
			v = int64(r.Intn(100)) - 50
		case 1:
			v = r.Int63() - r.Int63()
		case 2:
			v = []int64{math.MaxInt64, math.MinInt64, math.MaxInt32, math.MinInt32, 0}[r.Intn(5)]
		default:
			v = int64(r.Int31()) - int64(r.Int31())
		}
		if n.kind == kInt32 {
			v = int64(int32(v))
		}
		s := strconv.FormatInt(v, 10)
		if v > -1000 && v < 1000 {
			switch r.Intn(4) {
			case 0:
				s += ".0"
			case 1:
				s += "e0"
			case 2:
				if v != 0 {
					s = strconv.FormatInt(v*10, 10) + "E-1"
				}
			}
		}
		b.WriteString(s)
	case kFloat64, kFloat32:
		var f float64
		switch r.Intn(6) {
		case 0:
			f = float64(r.Intn(1000000)) / 100
		case 1:
			f = r.NormFloat64() * math.Pow10(r.Intn(50)-25)
		case 2:
			f = math.Float64frombits(r.Uint64())
		case 3:
			f = float64(r.Int63n(1000))
		case 4:
			f = []float64{0, math.Copysign(0, -1), 1e21, 1e-7, 1e-6, math.MaxFloat64, math.SmallestNonzeroFloat64, math.MaxFloat32}[r.Intn(8)]
		default:
			f = float64(float32(r.NormFloat64() * 1000))
		}
		if math.IsNaN(f) || math.IsInf(f, 0) || (n.kind == kFloat32 && math.Abs(f) > math.MaxFloat32) {
			f = 1.5
		}
		fmts := []byte{'g', 'e', 'f', 'E'}
		s := strconv.FormatFloat(f, fmts[r.Intn(len(fmts))], -1, 64)
		if r.Intn(5) == 0 && !strings.ContainsAny(s, "eE") {
			if !strings.Contains(s, ".") {
				s += "."
			}
			s += "000"
		}
		b.WriteString(s)
	case kString:
		b.WriteString(g.str(g.text()))
	case kBinary, kFixed:
		size := n.size
		if n.kind == kBinary {
			size = r.Intn(8)
		}
		raw := make([]byte, size)
		r.Read(raw)
		var s string
		if n.enc == EncodingBase16 {
			s = hex.EncodeToString(raw)
			if r.Intn(2) == 0 {
				s = strings.ToUpper(s)
			}
		} else {
			s = base64.StdEncoding.EncodeToString(raw)
		}
		b.WriteString(g.str(s))
	case kStruct:
		g.object(b, n)
	case kList:
		b.WriteString("[" + g.ws())
		for i := 0; i < r.Intn(4); i++ {
			if i > 0 {
				b.WriteString("," + g.ws())
			}
			g.value(b, n.elem)
		}
		b.WriteString("]")
	case kMap:
		b.WriteString("{")
		for i := 0; i < r.Intn(4); i++ {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(g.str(g.text()+strconv.Itoa(i)) + ":" + g.ws())
			g.value(b, n.elem)
		}
		b.WriteString("}")
	}
}

// text returns a random string with characters that need care.
func (g *gen) text() string {
	pieces := []string{"a", "BTC-USD", " ", `"`, `\`, "/", "\n", "\t", "\x00", "\x1f", "\x7f", "é", "日本", "😀", "\u2028", "<>&", "'"}
	var b strings.Builder
	for i := 0; i < g.rng.Intn(6); i++ {
		b.WriteString(pieces[g.rng.Intn(len(pieces))])
	}
	return b.String()
}

// str writes s as a JSON string, escaping at random where JSON allows.
func (g *gen) str(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		esc := g.rng.Intn(5) == 0
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || esc:
			if r >= 0x10000 {
				r1, r2 := utf16Pair(r)
				b.WriteString(`\u` + hex4s(r1) + `\u` + hex4s(r2))
			} else if r == '\n' && g.rng.Intn(2) == 0 {
				b.WriteString(`\n`)
			} else {
				s := hex4s(r)
				if g.rng.Intn(2) == 0 {
					s = strings.ToUpper(s)
				}
				b.WriteString(`\u` + s)
			}
		case r == '/' && g.rng.Intn(2) == 0:
			b.WriteString(`\/`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func hex4s(r rune) string {
	s := strconv.FormatInt(int64(r), 16)
	return strings.Repeat("0", 4-len(s)) + s
}

func utf16Pair(r rune) (rune, rune) {
	r -= 0x10000
	return 0xD800 + (r>>10)&0x3FF, 0xDC00 + r&0x3FF
}
