package schema

import (
	"strconv"

	"github.com/streamcast/streamcast/pkg/schema/jsontext"
)

// jvalue is a parsed JSON value that keeps the order of object keys, which
// encoding/json's maps lose and a schema's column order depends on. It is
// used for the small documents this package reads whole (schemas and where=
// filters); rows go through the streaming decoder instead.
type jvalue struct {
	kind    byte   // 'o' object, 'a' array, 's' string, 'n' number, 'b' boolean, 'z' null
	str     string // string text, number token, or "true"/"false"
	members []jmember
	items   []*jvalue
}

type jmember struct {
	key string
	val *jvalue
}

// get returns the member named key, or nil.
func (v *jvalue) get(key string) *jvalue {
	for _, m := range v.members {
		if m.key == key {
			return m.val
		}
	}
	return nil
}

// kindName names a JSON value's type in JSON Schema's words.
func (v *jvalue) kindName() string {
	switch v.kind {
	case 'o':
		return "an object"
	case 'a':
		return "an array"
	case 's':
		return "a string"
	case 'n':
		return "a number"
	case 'b':
		return "a boolean"
	}
	return "null"
}

// parseJSON parses one JSON document (surrounding whitespace allowed).
// Duplicate keys in an object are refused: the two copies could only be read
// by guessing which one was meant.
func parseJSON(data []byte) (*jvalue, error) {
	p := jparser{data: data}
	return p.parse()
}

// checkJSON refuses what parseJSON refuses, with the same errors, without
// building the tree: a where= filter is read from its text after this
// check, so that compiling one allocates about its own size rather than a
// tree node per value.
func checkJSON(data []byte) error {
	p := jparser{data: data, check: true}
	_, err := p.parse()
	return err
}

func (p *jparser) parse() (*jvalue, error) {
	data := p.data
	pos := jsontext.SkipWS(data, 0)
	v, pos, err := p.value(pos, 0)
	if err != nil {
		return nil, err
	}
	if pos = jsontext.SkipWS(data, pos); pos != len(data) {
		return nil, syntaxError("unexpected text after the document" + jsontext.GotAt(data, pos))
	}
	return v, nil
}

type syntaxError string

func (e syntaxError) Error() string { return jsontext.Problem(string(e)) }

type jparser struct {
	data []byte
	// check only validates: value returns nil, strings are decoded into
	// scratch and dropped, and an object's keys are kept only until its
	// duplicates are checked.
	check   bool
	scratch []byte
}

func (p *jparser) value(pos, depth int) (*jvalue, int, error) {
	data := p.data
	if pos >= len(data) {
		return nil, pos, syntaxError("unexpected end of input, expected a value")
	}
	if depth >= jsontext.MaxDepth {
		return nil, pos, syntaxError(jsontext.TooDeep)
	}
	switch c := data[pos]; {
	case c == '{':
		var v *jvalue
		if !p.check {
			v = &jvalue{kind: 'o'}
		}
		var keys []string // check: the keys so far, for duplicates
		pos = jsontext.SkipWS(data, pos+1)
		if pos < len(data) && data[pos] == '}' {
			return v, pos + 1, nil
		}
		for {
			if pos >= len(data) || data[pos] != '"' {
				return nil, pos, syntaxError("expected a string key" + jsontext.GotAt(data, pos))
			}
			kb, end, prob := jsontext.DecodeString(data, pos, nil)
			if prob != "" {
				return nil, end, syntaxError(prob)
			}
			key := string(kb)
			dup := false
			if p.check {
				for _, k := range keys {
					dup = dup || k == key
				}
				keys = append(keys, key)
			} else {
				dup = v.get(key) != nil
			}
			if dup {
				return nil, pos, syntaxError("the key " + strconv.Quote(key) + " appears twice in one object")
			}
			pos = jsontext.SkipWS(data, end)
			if pos >= len(data) || data[pos] != ':' {
				return nil, pos, syntaxError("expected ':' after a key" + jsontext.GotAt(data, pos))
			}
			child, end2, err := p.value(jsontext.SkipWS(data, pos+1), depth+1)
			if err != nil {
				return nil, end2, err
			}
			if !p.check {
				v.members = append(v.members, jmember{key, child})
			}
			pos = jsontext.SkipWS(data, end2)
			if pos < len(data) && data[pos] == ',' {
				pos = jsontext.SkipWS(data, pos+1)
				continue
			}
			if pos < len(data) && data[pos] == '}' {
				return v, pos + 1, nil
			}
			return nil, pos, syntaxError("expected ',' or '}' in an object" + jsontext.GotAt(data, pos))
		}
	case c == '[':
		var v *jvalue
		if !p.check {
			v = &jvalue{kind: 'a'}
		}
		pos = jsontext.SkipWS(data, pos+1)
		if pos < len(data) && data[pos] == ']' {
			return v, pos + 1, nil
		}
		for {
			child, end, err := p.value(pos, depth+1)
			if err != nil {
				return nil, end, err
			}
			if !p.check {
				v.items = append(v.items, child)
			}
			pos = jsontext.SkipWS(data, end)
			if pos < len(data) && data[pos] == ',' {
				pos = jsontext.SkipWS(data, pos+1)
				continue
			}
			if pos < len(data) && data[pos] == ']' {
				return v, pos + 1, nil
			}
			return nil, pos, syntaxError("expected ',' or ']' in an array" + jsontext.GotAt(data, pos))
		}
	case c == '"':
		if p.check {
			b, end, prob := jsontext.DecodeString(data, pos, p.scratch[:0])
			p.scratch = b
			if prob != "" {
				return nil, end, syntaxError(prob)
			}
			return nil, end, nil
		}
		b, end, prob := jsontext.DecodeString(data, pos, nil)
		if prob != "" {
			return nil, end, syntaxError(prob)
		}
		return &jvalue{kind: 's', str: string(b)}, end, nil
	case p.check && (c == 't' && jsontext.HasLit(data, pos, "true") || c == 'n' && jsontext.HasLit(data, pos, "null")):
		return nil, pos + 4, nil
	case p.check && c == 'f' && jsontext.HasLit(data, pos, "false"):
		return nil, pos + 5, nil
	case c == 't' && jsontext.HasLit(data, pos, "true"):
		return &jvalue{kind: 'b', str: "true"}, pos + 4, nil
	case c == 'f' && jsontext.HasLit(data, pos, "false"):
		return &jvalue{kind: 'b', str: "false"}, pos + 5, nil
	case c == 'n' && jsontext.HasLit(data, pos, "null"):
		return &jvalue{kind: 'z'}, pos + 4, nil
	case c == '-' || jsontext.IsDigit(c):
		end, _, ok := jsontext.ScanNumber(data, pos)
		if !ok {
			return nil, end, syntaxError("malformed number" + jsontext.GotAt(data, end))
		}
		if p.check {
			return nil, end, nil
		}
		return &jvalue{kind: 'n', str: string(data[pos:end])}, end, nil
	}
	return nil, pos, syntaxError("expected a value" + jsontext.GotAt(data, pos))
}
