package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/streamcast/streamcast/pkg/schema"
)

// Error is a configuration value refused: Key is its path
// (limits.max_backlog, streams[1].name; "" when the file as a whole is
// wrong), From says where the value came from, as a user would change it,
// and Err says what is wrong and the way out.
type Error struct {
	Key string
	// From is "config file streamcast.yaml, line 4", "environment
	// STREAMCAST_LIMITS_MAX_BACKLOG", "flag --listen", "default", or "" when
	// not known (a value built in code).
	From string
	Err  error
}

func (e *Error) Error() string {
	if e.From == "" {
		return e.Err.Error()
	}
	return e.From + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// keyError is an *Error about key; Origins.Explain fills in From.
func keyError(key string, err error) *Error { return &Error{Key: key, Err: err} }

// keyErrorf is an *Error about key with a formatted message, which should
// name the key itself ("limits.max_backlog is 0; it must be at least 1").
func keyErrorf(key, format string, args ...any) *Error {
	return keyError(key, fmt.Errorf(format, args...))
}

// leadingKey matches a key path at the start of a message.
var leadingKey = regexp.MustCompile(`^[a-z0-9_]+(\.[a-z0-9_]+)*`)

// keyFromMessageOf makes err an *Error about the key its message begins with
// ("tiers.delete_grace is negative; …"), when that is a key of the struct
// type t; it returns any other error, or an *Error, as it is.
func keyFromMessageOf(t reflect.Type, err error) error {
	var ce *Error
	if err == nil || errors.As(err, &ce) {
		return err
	}
	k := leadingKey.FindString(err.Error())
	if _, ok := keyType(t, k); !ok {
		return err
	}
	return keyError(k, err)
}

// Origins records where each key of a loaded document came from. A nil
// *Origins knows nothing: From says "", Explain changes nothing.
type Origins struct {
	file   string                // the config file as named to streamcast; "" when none
	lines  map[string]int        // key path → line of its value in the file
	scalar map[string]bool       // key paths whose value in the file is no mapping (maintain: false): it decides their insides
	over   map[string]string     // key path → Override.From
	docs   map[string]*yaml.Node // key path → a JSON document written as YAML in the file (a stream's schema)
}

// at names a line of the file.
func (o *Origins) at(line int) string {
	if o.file == "" {
		return fmt.Sprintf("line %d", line)
	}
	return fmt.Sprintf("config file %s, line %d", o.file, line)
}

// from says where key's value came from: its override or its line in the
// file; else that of the nearest enclosing key that decides it (an
// override or a scalar replaces a whole section; a stream's key left out
// takes the stream's default, best found at the stream's line); else the
// default.
func (o *Origins) from(key string) string {
	for k := key; k != ""; k = parentKey(k) {
		if f, ok := o.over[k]; ok {
			return f
		}
		if l, ok := o.lines[k]; ok && (k == key || o.scalar[k] || strings.HasSuffix(k, "]")) {
			return o.at(l)
		}
	}
	return "default"
}

// replaced forgets where key and everything inside it came from: an
// override has just replaced them.
func (o *Origins) replaced(key string) {
	inside := func(k string) bool {
		return k == key || strings.HasPrefix(k, key+".") || strings.HasPrefix(k, key+"[")
	}
	maps.DeleteFunc(o.lines, func(k string, _ int) bool { return inside(k) })
	maps.DeleteFunc(o.over, func(k string, _ string) bool { return inside(k) })
}

// parentKey is "streams[0]" for "streams[0].name", "streams" for
// "streams[0]", "" for "streams".
func parentKey(k string) string {
	i := strings.LastIndexAny(k, ".[")
	if i < 0 {
		return ""
	}
	return k[:i]
}

// From says where the value of key (a path such as limits.max_backlog)
// came from, in the words errors use: a file and line, an override's From,
// or "default". It is "" for a nil *Origins.
func (o *Origins) From(key string) string {
	if o == nil {
		return ""
	}
	return o.from(key)
}

// InFile reports whether the file gave key a value.
func (o *Origins) InFile(key string) bool {
	if o == nil {
		return false
	}
	_, ok := o.lines[key]
	return ok
}

// Explain fills in the From of an *Error that names a key and lacks one,
// and returns err. An error about a property of a schema written in the
// file names the property's line.
func (o *Origins) Explain(err error) error {
	var ce *Error
	if o != nil && errors.As(err, &ce) && ce.From == "" && ce.Key != "" {
		ce.From = o.from(ce.Key)
		var se *schema.CompileError
		if doc, ok := o.docs[ce.Key]; ok && errors.As(ce.Err, &se) && se.Path != "" {
			if l := propertyLine(doc, se.Path); l > 0 {
				ce.From = o.at(l)
			}
		}
	}
	return err
}

// Override is a value for one key given outside the config file, by an
// environment variable or a flag. It replaces what the file says.
type Override struct {
	// Key is a key path, such as limits.max_backlog, or a section that
	// takes a scalar (maintain, for maintain: false).
	Key string
	// Value is written as it would be in the file (a duration as 10s, a
	// size as 8MiB); a list takes comma-separated items.
	Value string
	// From names where it came from in errors: "environment
	// STREAMCAST_LIMITS_MAX_BACKLOG", "flag --listen".
	From string
}

// keysOf returns, sorted, the key paths of the struct type t that an
// environment variable or flag may set: every setting whose value is a
// scalar or a list of scalars, inside sections at any depth, but not inside
// a list of sections (such as a list of streams, whose insides only a file
// gives).
func keysOf(t reflect.Type) []string {
	var out []string
	var walk func(prefix string, t reflect.Type)
	walk = func(prefix string, t reflect.Type) {
		for _, k := range yamlKeys(t) {
			f, _ := fieldByKey(t, k)
			full := joinKey(prefix, k)
			switch ft := deref(f.Type); {
			case ft.Kind() == reflect.Struct:
				walk(full, ft)
			case isSectionList(ft), isSectionMap(ft):
				// from the file only
			default:
				out = append(out, full)
			}
		}
	}
	walk("", deref(t))
	sort.Strings(out)
	return out
}

// decodeSource is what decodeInto reads: a config file's contents and the values given
// outside it.
type decodeSource struct {
	// File names the config file in messages; "" when there is none.
	File string
	// Data is the file's contents, read once by the caller.
	Data []byte
	// Overrides are laid over the file, in order.
	Overrides []Override
	// Unknown, when set, is asked about a key the struct has no field for,
	// before it is refused as unknown: a non-nil error (the key looks like
	// a credential) is reported instead, with the key's line.
	Unknown func(key string) error
}

// decodeInto decodes a configuration into dst, a pointer to a struct that holds
// the base values: src.Data, the contents of the config file src.File,
// laid over the base, then each override laid over that, in order (so give the environment's before the flags': a
// later one wins, and one that sets a section, maintain: false, replaces
// what earlier ones set inside it). A key the file leaves out keeps the
// base's value; a top-level list of sections with no item in it (streams:
// with no stream) keeps the base's list.
//
// It refuses what cannot be decoded: a document that is not YAML, an unknown
// key, a key given twice, a key that looks like a credential, a value of the
// wrong type. Each error is an *Error naming the key and the file and line,
// or the override it came from. The Origins it returns say where every value
// came from, for the errors of later checks (Origins.Explain).
func decodeInto(dst any, src decodeSource) (*Origins, error) {
	file, data, overrides := src.File, src.Data, src.Overrides
	pv := reflect.ValueOf(dst)
	if pv.Kind() != reflect.Pointer || pv.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("decodeInto: dst is a %T, not a pointer to a struct", dst) // a programming error
	}
	t := pv.Elem().Type()
	o := &Origins{file: file, lines: map[string]int{}, scalar: map[string]bool{}, over: map[string]string{}}
	p := &parser{Origins: o, keyAt: map[int]string{}, unknown: src.Unknown}
	o.docs = map[string]*yaml.Node{}
	from := "config"
	if file != "" {
		from = "config file " + file
	}
	top := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		line, problem := syntaxLine(data, err)
		if line == 0 {
			return nil, &Error{From: from, Err: fmt.Errorf("not valid YAML: %w", err)}
		}
		return nil, &Error{From: o.at(line), Err: errors.New("not valid YAML: " + problem)}
	}
	if len(doc.Content) > 0 && doc.Content[0].ShortTag() != "!!null" {
		top = doc.Content[0]
		if top.Kind != yaml.MappingNode {
			return nil, &Error{From: o.at(top.Line), Err: fmt.Errorf("the config is a mapping of %s", strings.Join(yamlKeys(t), ", "))}
		}
	}
	if err := p.check(top, "", t); err != nil {
		return nil, err
	}
	for _, ov := range overrides {
		if err := overlay(top, t, pv.Elem(), ov); err != nil {
			return nil, err
		}
		o.replaced(ov.Key)
		o.over[ov.Key] = ov.From
	}
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i].Value, top.Content[i+1]
		if f, ok := fieldByKey(t, k); ok && isSectionList(f.Type) && len(v.Content) == 0 && v.Kind != yaml.AliasNode {
			top.Content = append(top.Content[:i:i], top.Content[i+2:]...)
			delete(o.lines, k)
			break
		}
	}
	if err := top.Decode(dst); err != nil {
		return nil, p.decodeError(err)
	}
	return o, nil
}

// isSectionList reports whether t is a list of sections (structs).
func isSectionList(t reflect.Type) bool {
	t = deref(t)
	return t.Kind() == reflect.Slice && deref(t.Elem()).Kind() == reflect.Struct
}

// isSectionMap reports whether t is a mapping of names to sections
// (control.profiles): set from the file only, each value checked as its
// struct.
func isSectionMap(t reflect.Type) bool {
	t = deref(t)
	return t.Kind() == reflect.Map && t.Key().Kind() == reflect.String && deref(t.Elem()).Kind() == reflect.Struct
}

// parser checks a config document against a struct type's yaml tags.
type parser struct {
	*Origins
	unknown func(key string) error
	keyAt   map[int]string // line → the deepest key whose value is on it, to name keys in type errors
}

// check refuses a key of n that the type t has no field for, a key given
// twice, and a credential, and records the line of every key.
func (p *parser) check(n *yaml.Node, path string, t reflect.Type) error {
	t = deref(t)
	switch {
	case t.Kind() == reflect.Struct && n.Kind == yaml.MappingNode:
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			kn, v := n.Content[i], n.Content[i+1]
			full := joinKey(path, kn.Value)
			if seen[kn.Value] {
				return &Error{Key: full, From: p.at(kn.Line), Err: fmt.Errorf("key %s is given twice", full)}
			}
			seen[kn.Value] = true
			f, ok := fieldByKey(t, kn.Value)
			if !ok {
				if p.unknown != nil {
					if err := p.unknown(kn.Value); err != nil {
						return &Error{Key: full, From: p.at(kn.Line), Err: fmt.Errorf("key %s: %w", full, err)}
					}
				}
				return &Error{Key: full, From: p.at(kn.Line), Err: fmt.Errorf("unknown key %s (known here: %s)", full, strings.Join(yamlKeys(t), ", "))}
			}
			p.lines[full] = v.Line
			p.scalar[full] = v.Kind != yaml.MappingNode && v.Kind != yaml.SequenceNode
			p.keyAt[v.Line] = full // a key's children come after it: the deepest key of a line wins
			if f.Type == reflect.TypeFor[RawJSON]() {
				if err := p.document(v, full); err != nil {
					return err
				}
				continue
			}
			if err := p.check(v, full, f.Type); err != nil {
				return err
			}
		}
	case isSectionMap(t) && n.Kind == yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			kn, v := n.Content[i], n.Content[i+1]
			full := joinKey(path, kn.Value)
			p.lines[full] = v.Line
			p.keyAt[v.Line] = full
			if err := p.check(v, full, t.Elem()); err != nil {
				return err
			}
		}
	case isSectionList(t):
		if n.Kind != yaml.SequenceNode && n.ShortTag() != "!!null" {
			return &Error{Key: path, From: p.at(n.Line), Err: fmt.Errorf("%s is a list, one mapping of %s per item", path, strings.Join(yamlKeys(deref(t.Elem())), ", "))}
		}
		for j, item := range n.Content {
			full := fmt.Sprintf("%s[%d]", path, j)
			p.lines[full] = item.Line
			p.keyAt[item.Line] = full
			if err := p.check(item, full, t.Elem()); err != nil {
				return err
			}
		}
	}
	return nil
}

// document checks a JSON document written as YAML (a stream's schema) at
// key: a key given twice in one of its mappings is refused at its line, as
// in the rest of the file (JSON would keep one of the two, silently), and
// the document is kept so that an error about one of its properties can
// name the property's line (Origins.Explain).
func (p *parser) document(n *yaml.Node, key string) error {
	p.docs[key] = n
	var walk func(n *yaml.Node, path string) error
	walk = func(n *yaml.Node, path string) error {
		switch n.Kind {
		case yaml.MappingNode:
			seen := map[string]bool{}
			for i := 0; i+1 < len(n.Content); i += 2 {
				kn := n.Content[i]
				full := joinKey(path, kn.Value)
				if seen[kn.Value] {
					return &Error{Key: key, From: p.at(kn.Line), Err: fmt.Errorf("key %s is given twice", full)}
				}
				seen[kn.Value] = true
				if err := walk(n.Content[i+1], full); err != nil {
					return err
				}
			}
		case yaml.SequenceNode:
			for j, c := range n.Content {
				if err := walk(c, fmt.Sprintf("%s[%d]", path, j)); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk(n, key)
}

// propertyLine is the line of the property path names (as
// schema.CompileError's Path: "res.service", "tags[]", "attrs{}") in the
// schema document n, written as YAML; 0 when the document does not hold
// it.
func propertyLine(n *yaml.Node, path string) int {
	line := 0
	for seg := range strings.SplitSeq(path, ".") {
		name := strings.TrimRight(seg, "[]{}")
		var k *yaml.Node
		if k, n = mappingEntry(mappingValue(n, "properties"), name); n == nil {
			return 0
		}
		line = k.Line
		for rest := seg[len(name):]; rest != ""; rest = rest[2:] {
			kw := "items"
			if strings.HasPrefix(rest, "{}") {
				kw = "additionalProperties"
			}
			if k, n = mappingEntry(n, kw); n == nil {
				return line
			}
			line = k.Line
		}
	}
	return line
}

// mappingEntry is the key and value nodes of key in the mapping n; nils
// when n is no mapping or lacks it.
func mappingEntry(n *yaml.Node, key string) (*yaml.Node, *yaml.Node) {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i], n.Content[i+1]
		}
	}
	return nil, nil
}

func mappingValue(n *yaml.Node, key string) *yaml.Node {
	_, v := mappingEntry(n, key)
	return v
}

// yamlLine splits yaml's "yaml: line 3: found …" into 3 and the rest.
var yamlLine = regexp.MustCompile(`^yaml: (?:line ([0-9]+): )?`)

// syntaxLine finds the line at fault in a document yaml refuses, and the
// problem without the line; 0 when it cannot tell. yaml names the line
// where the construct around the mistake began (the mapping before a
// line indented wrongly, or by a tab), not the mistake's own; the line at
// fault is the first whose addition, from that line on, makes the
// document fail for the same reason. A tab in an indentation is named
// directly: it is invisible in most editors.
func syntaxLine(data []byte, err error) (int, string) {
	m := yamlLine.FindStringSubmatch(err.Error())
	if m == nil || m[1] == "" {
		return 0, ""
	}
	problem := err.Error()[len(m[0]):]
	reported, _ := strconv.Atoi(m[1])
	lines := strings.SplitAfter(string(data), "\n")
	if strings.Contains(problem, "tab character") {
		for i := max(reported-1, 0); i < len(lines); i++ {
			indent := lines[i][:len(lines[i])-len(strings.TrimLeft(lines[i], " \t"))]
			if strings.Contains(indent, "\t") {
				return i + 1, problem + "; YAML indents with spaces, and this line's indentation holds a tab"
			}
		}
	}
	const maxTries = 500 // each try parses a prefix: bound the work on a long file
	for k := max(reported, 1); k <= len(lines) && k < reported+maxTries; k++ {
		var n yaml.Node
		perr := yaml.Unmarshal([]byte(strings.Join(lines[:k], "")), &n)
		if perr == nil {
			continue
		}
		if pm := yamlLine.FindString(perr.Error()); perr.Error()[len(pm):] == problem {
			return k, problem
		}
	}
	return reported, problem
}

// lineMsg splits "line 3: cannot unmarshal …" into 3 and the rest.
var lineMsg = regexp.MustCompile(`^line ([0-9]+): `)

// decodeError turns an error of yaml's Decode into an *Error naming the
// key and line, from the first message (a user fixes one at a time).
func (p *parser) decodeError(err error) error {
	msg := err.Error()
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg = te.Errors[0]
	}
	m := lineMsg.FindStringSubmatch(msg)
	if m == nil {
		return &Error{From: p.at(0), Err: err}
	}
	line, _ := strconv.Atoi(m[1])
	rest := msg[len(m[0]):]
	key := p.keyAt[line]
	if key != "" && !strings.HasPrefix(rest, key) {
		rest = key + ": " + rest
	}
	return &Error{Key: key, From: p.at(line), Err: errors.New(rest)}
}

// overlay sets ov.Key in the document top to ov.Value, after checking that
// the value decodes on its own into a copy of base (of struct type t), so
// that a wrong one is reported as coming from ov.From.
func overlay(top *yaml.Node, t reflect.Type, base reflect.Value, ov Override) error {
	ft, ok := keyType(t, ov.Key)
	if !ok {
		return &Error{Key: ov.Key, From: ov.From, Err: fmt.Errorf("%s is not a configuration key", ov.Key)}
	}
	path := strings.Split(ov.Key, ".")
	alone := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	if err := setPath(alone, path, overrideNode(ft, ov.Value)); err != nil {
		return &Error{Key: ov.Key, From: ov.From, Err: err}
	}
	scratch := reflect.New(t)
	scratch.Elem().Set(base)
	if err := alone.Decode(scratch.Interface()); err != nil {
		msg := err.Error()
		var te *yaml.TypeError
		if errors.As(err, &te) && len(te.Errors) > 0 {
			msg = te.Errors[0]
		}
		msg = lineMsg.ReplaceAllString(msg, "")
		if !strings.HasPrefix(msg, ov.Key) {
			msg = ov.Key + ": " + msg
		}
		return &Error{Key: ov.Key, From: ov.From, Err: errors.New(msg)}
	}
	if err := setPath(top, path, overrideNode(ft, ov.Value)); err != nil {
		return &Error{Key: ov.Key, From: ov.From, Err: err}
	}
	return nil
}

// overrideNode is the YAML node of an override's value for a field of type
// t: a plain scalar, read as the same text would be in the file, or for a
// list a sequence of the comma-separated items.
func overrideNode(t reflect.Type, v string) *yaml.Node {
	if t.Kind() == reflect.Slice && t.Elem().Kind() != reflect.Uint8 {
		seq := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		for item := range strings.SplitSeq(v, ",") {
			if item = strings.TrimSpace(item); item != "" {
				seq.Content = append(seq.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: item})
			}
		}
		return seq
	}
	return &yaml.Node{Kind: yaml.ScalarNode, Value: v}
}

// setPath sets the value at path in the mapping n, making the mappings on
// the way; a null on the way (limits: with nothing under it) becomes one.
func setPath(n *yaml.Node, path []string, val *yaml.Node) error {
	for i, k := range path {
		idx := -1
		for j := 0; j+1 < len(n.Content); j += 2 {
			if n.Content[j].Value == k {
				idx = j + 1
			}
		}
		if i == len(path)-1 {
			if idx >= 0 {
				n.Content[idx] = val
			} else {
				n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k}, val)
			}
			return nil
		}
		var next *yaml.Node
		switch {
		case idx < 0:
			next = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
			n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k}, next)
		case n.Content[idx].ShortTag() == "!!null":
			next = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
			n.Content[idx] = next
		case n.Content[idx].Kind != yaml.MappingNode:
			at, where := strings.Join(path[:i+1], "."), "here"
			if l := n.Content[idx].Line; l > 0 {
				where = fmt.Sprintf("in the config file (line %d)", l)
			}
			return fmt.Errorf("%s is %q %s, which holds no %s; change one of them", at, n.Content[idx].Value, where, strings.Join(path, "."))
		default:
			next = n.Content[idx]
		}
		n = next
	}
	return nil
}

// yamlName is a struct field's key in the file, "" for one not in it.
func yamlName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "-" {
		return ""
	}
	return name
}

// namesOf lists the keys of struct type t (its fields' yaml names), in field
// order: for messages that list what a section may hold.
func namesOf(t reflect.Type) []string { return yamlKeys(deref(t)) }

// yamlKeys lists the keys of struct type t, in field order.
func yamlKeys(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		if k := yamlName(t.Field(i)); k != "" {
			out = append(out, k)
		}
	}
	return out
}

// fieldByKey finds the field of struct type t whose key is k.
func fieldByKey(t reflect.Type, k string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		if f := t.Field(i); yamlName(f) == k && k != "" {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// keyType is the type of the field at key path k of struct type t
// (sections included, the insides of lists not).
func keyType(t reflect.Type, k string) (reflect.Type, bool) {
	if k == "" {
		return nil, false
	}
	t = deref(t)
	for part := range strings.SplitSeq(k, ".") {
		if t.Kind() != reflect.Struct {
			return nil, false
		}
		f, ok := fieldByKey(t, part)
		if !ok {
			return nil, false
		}
		t = deref(f.Type)
	}
	return t, true
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

func joinKey(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

// renderYAML renders v, a struct with yaml tags, as the YAML document decodeInto reads
// back into the same value, with every field tagged secret:"true" redacted.
func renderYAML(v any) ([]byte, error) {
	n, err := renderNode(v)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return nil, fmt.Errorf("render the configuration as YAML: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("render the configuration as YAML: %w", err)
	}
	return []byte(b.String()), nil
}

// renderJSON renders v as one compact JSON object with the keys and values
// renderYAML gives it (JSON is YAML, so decodeInto reads it back too), secrets redacted.
func renderJSON(v any) ([]byte, error) {
	n, err := renderNode(v)
	if err != nil {
		return nil, err
	}
	b, err := NodeJSON(nil, n)
	if err != nil {
		return nil, fmt.Errorf("render the configuration as JSON: %w", err)
	}
	return b, nil
}

// Redacted is what a field tagged secret:"true" is rendered as.
const Redacted = "[redacted]"

// renderNode encodes v, with every field tagged secret:"true" redacted, as
// a YAML node. Redaction works on a copy: v's slices and pointers are not
// touched.
func renderNode(v any) (*yaml.Node, error) {
	cp := reflect.New(reflect.TypeOf(v)).Elem()
	cp.Set(reflect.ValueOf(v))
	redact(cp)
	var n yaml.Node
	if err := n.Encode(cp.Interface()); err != nil {
		return nil, fmt.Errorf("render the configuration: %w", err)
	}
	return &n, nil
}

// redact replaces, in the settable value v, every field tagged
// secret:"true" at any depth, copying the slices and pointees it changes.
func redact(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			if f.Tag.Get("secret") == "true" {
				hide(v.Field(i))
				continue
			}
			redact(v.Field(i))
		}
	case reflect.Slice:
		if v.IsNil() || !canHoldSecret(v.Type().Elem()) {
			return
		}
		cp := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		reflect.Copy(cp, v)
		v.Set(cp)
		for i := range cp.Len() {
			redact(cp.Index(i))
		}
	case reflect.Pointer:
		if v.IsNil() || !canHoldSecret(v.Type().Elem()) {
			return
		}
		cp := reflect.New(v.Type().Elem())
		cp.Elem().Set(v.Elem())
		v.Set(cp)
		redact(cp.Elem())
	}
}

// canHoldSecret reports whether a value of type t may have a field tagged
// secret inside it.
func canHoldSecret(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Struct:
		return true
	case reflect.Slice, reflect.Pointer, reflect.Array:
		return canHoldSecret(t.Elem())
	}
	return false
}

// hide replaces a secret: a string (or each string of a list) that is set
// becomes "[redacted]", anything else its zero value.
func hide(v reflect.Value) {
	switch {
	case v.Kind() == reflect.String:
		if v.Len() > 0 {
			v.SetString(Redacted)
		}
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.String:
		cp := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := range cp.Len() {
			cp.Index(i).SetString(Redacted)
		}
		if !v.IsNil() {
			v.Set(cp)
		}
	default:
		v.SetZero()
	}
}

// NodeJSON appends the JSON encoding of a YAML node: mappings keep their
// key order (a JSON Schema's property order is its column order), and a
// mapping key that is not a scalar is an error naming its line.
func NodeJSON(dst []byte, n *yaml.Node) ([]byte, error) {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return append(dst, "null"...), nil
		}
		return NodeJSON(dst, n.Content[0])
	case yaml.AliasNode:
		return NodeJSON(dst, n.Alias)
	case yaml.MappingNode:
		dst = append(dst, '{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			if i > 0 {
				dst = append(dst, ',')
			}
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("line %d: a JSON Schema key must be a string", k.Line)
			}
			kb, _ := json.Marshal(k.Value)
			dst = append(dst, kb...)
			dst = append(dst, ':')
			var err error
			if dst, err = NodeJSON(dst, n.Content[i+1]); err != nil {
				return nil, err
			}
		}
		return append(dst, '}'), nil
	case yaml.SequenceNode:
		dst = append(dst, '[')
		for i, c := range n.Content {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = NodeJSON(dst, c); err != nil {
				return nil, err
			}
		}
		return append(dst, ']'), nil
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return append(dst, "null"...), nil
		case "!!bool":
			var b bool
			if err := n.Decode(&b); err != nil {
				return nil, err
			}
			return strconv.AppendBool(dst, b), nil
		case "!!int":
			var i int64
			if err := n.Decode(&i); err != nil {
				return nil, fmt.Errorf("line %d: %w", n.Line, err)
			}
			return strconv.AppendInt(dst, i, 10), nil
		case "!!float":
			var f float64
			if err := n.Decode(&f); err != nil {
				return nil, fmt.Errorf("line %d: %w", n.Line, err)
			}
			b, err := json.Marshal(f)
			if err != nil {
				return nil, fmt.Errorf("line %d: %v is not a JSON number", n.Line, n.Value)
			}
			return append(dst, b...), nil
		default:
			b, _ := json.Marshal(n.Value)
			return append(dst, b...), nil
		}
	}
	return nil, fmt.Errorf("line %d: unsupported YAML node", n.Line)
}
