package broker

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// This file holds how a Config is read and written: the YAML file parsed
// with its line numbers, values from outside the file (environment
// variables, flags) laid over it, errors that say where a value came from,
// and the renderings `streamcast config` prints. The keys are never listed
// by hand: they are Config's yaml tags, found by reflection, so a field
// added to any section is known, settable and printed at once.

// ConfigError is a configuration value streamcast refuses: Key is its path
// (limits.max_backlog, streams[1].name; "" when the file as a whole is
// wrong), From says where the value came from, as a user would change it,
// and Err says what is wrong and the way out.
type ConfigError struct {
	Key string
	// From is "config file streamcast.yaml, line 4", "environment
	// STREAMCAST_LIMITS_MAX_BACKLOG", "flag --listen", "default", or "" when
	// not known (a Config built in code).
	From string
	Err  error
}

func (e *ConfigError) Error() string {
	if e.From == "" {
		return e.Err.Error()
	}
	return e.From + ": " + e.Err.Error()
}

func (e *ConfigError) Unwrap() error { return e.Err }

func keyErr(key string, err error) *ConfigError { return &ConfigError{Key: key, Err: err} }

func badKey(key, format string, args ...any) *ConfigError {
	return keyErr(key, fmt.Errorf(format, args...))
}

// leadingKey matches a key path at the start of a message.
var leadingKey = regexp.MustCompile(`^[a-z0-9_]+(\.[a-z0-9_]+)*`)

// keyFromMessage makes err a *ConfigError for the key its message begins
// with ("tiers.delete_grace is negative; …"), when that is a key of Config.
func keyFromMessage(err error) error {
	var ce *ConfigError
	if err == nil || errors.As(err, &ce) {
		return err
	}
	k := leadingKey.FindString(err.Error())
	if _, ok := keyType(k); !ok {
		return err
	}
	return keyErr(k, err)
}

// origins records where each key of a loaded Config came from.
type origins struct {
	file   string            // the config file as named to streamcast; "" when none
	lines  map[string]int    // key path → line of its value in the file
	scalar map[string]bool   // key paths whose value in the file is no mapping (maintain: false): it decides their insides
	over   map[string]string // key path → Override.From
}

// at names a line of the file.
func (o *origins) at(line int) string {
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
func (o *origins) from(key string) string {
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
func (o *origins) replaced(key string) {
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
// came from, in the words errors use: a file and line, an environment
// variable, a flag, or "default". It is "" for a Config built in code.
func (c *Config) From(key string) string {
	if c.origin == nil {
		return ""
	}
	return c.origin.from(key)
}

// explain fills in where the value of a *ConfigError's key came from.
func (c *Config) explain(err error) error {
	var ce *ConfigError
	if c.origin != nil && errors.As(err, &ce) && ce.From == "" && ce.Key != "" {
		ce.From = c.origin.from(ce.Key)
	}
	return err
}

// Override is a value for one key given outside the config file, by an
// environment variable or a flag. It replaces what the file says.
type Override struct {
	// Key is a key path of Config, such as limits.max_backlog, or a section
	// that takes a scalar (maintain, for maintain: false).
	Key string
	// Value is written as it would be in the file (a duration as 10s, a
	// size as 8MiB); a list takes comma-separated items.
	Value string
	// From names where it came from in errors: "environment
	// STREAMCAST_LIMITS_MAX_BACKLOG", "flag --listen".
	From string
}

// OverrideKeys returns, sorted, the key paths an environment variable or
// flag may set: every setting of Config whose value is a scalar or a list of
// scalars, which is all of them but the streams list (a stream's inline
// schema keeps its property names' case only in the file).
func OverrideKeys() []string {
	var out []string
	var walk func(prefix string, t reflect.Type)
	walk = func(prefix string, t reflect.Type) {
		for _, k := range yamlKeys(t) {
			f, _ := fieldByKey(t, k)
			full := joinKey(prefix, k)
			ft := deref(f.Type)
			switch {
			case ft.Kind() == reflect.Struct:
				walk(full, ft)
			case ft.Kind() == reflect.Slice && deref(ft.Elem()).Kind() == reflect.Struct:
				// a list of sections (streams): from the file only
			default:
				out = append(out, full)
			}
		}
	}
	walk("", reflect.TypeFor[Config]())
	sort.Strings(out)
	return out
}

// ParseConfig reads a YAML config on top of DefaultConfig, as LoadConfig
// does with no file name and no overrides. Relative schema_file paths are
// resolved against dir. It does not validate: call Validate.
func ParseConfig(data []byte, dir string) (Config, error) {
	return load(DefaultConfig(), "", dir, data, nil)
}

// LoadConfig decodes a configuration: data, the contents of the config file
// named file (both empty when there is none), laid over base, then each
// override laid over that, in order (so give the environment's before the
// flags': a later one wins, and one that sets a section, maintain: false,
// replaces what earlier ones set inside it). A key the file leaves out keeps base's value;
// streams: with no stream in it keeps base's streams (EmbeddedConfig's demo
// stream, for serve). Relative schema_file paths are resolved against the
// file's directory.
//
// It refuses what cannot be decoded: a document that is not YAML, an unknown
// key, a key given twice, a key that looks like a credential, a value of the
// wrong type. Each error is a *ConfigError naming the key and the file and
// line, or the override it came from. It does not Validate, but it records
// where every value came from, so that Validate's errors say it too.
func LoadConfig(base Config, file string, data []byte, overrides ...Override) (Config, error) {
	dir := ""
	if file != "" {
		dir = filepath.Dir(file)
	}
	return load(base, file, dir, data, overrides)
}

func load(base Config, file, dir string, data []byte, overrides []Override) (Config, error) {
	o := &origins{file: file, lines: map[string]int{}, scalar: map[string]bool{}, over: map[string]string{}}
	p := &parser{origins: o, keyAt: map[int]string{}}
	cfg := base
	fileErr := func(err error) error {
		from := "config"
		if file != "" {
			from = "config file " + file
		}
		return &ConfigError{From: from, Err: err}
	}
	top := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return cfg, fileErr(fmt.Errorf("not valid YAML: %w", err))
	}
	if len(doc.Content) > 0 && doc.Content[0].ShortTag() != "!!null" {
		top = doc.Content[0]
		if top.Kind != yaml.MappingNode {
			return cfg, &ConfigError{From: o.at(top.Line), Err: fmt.Errorf("the config is a mapping of %s", strings.Join(yamlKeys(reflect.TypeFor[Config]()), ", "))}
		}
	}
	if err := p.check(top, "", reflect.TypeFor[Config]()); err != nil {
		return cfg, err
	}
	for _, ov := range overrides {
		if err := overlay(top, ov); err != nil {
			return cfg, err
		}
		o.replaced(ov.Key)
		o.over[ov.Key] = ov.From
	}
	// streams: with no stream in it leaves base's streams (the demo stream).
	for i := 0; i+1 < len(top.Content); i += 2 {
		if v := top.Content[i+1]; top.Content[i].Value == "streams" && len(v.Content) == 0 && v.Kind != yaml.AliasNode {
			top.Content = slices.Delete(top.Content, i, i+2)
			delete(o.lines, "streams")
			break
		}
	}
	if err := top.Decode(&cfg); err != nil {
		return cfg, p.decodeError(err)
	}
	if _, fromFile := o.lines["streams"]; fromFile && dir != "" {
		for i := range cfg.Streams {
			s := &cfg.Streams[i]
			if s.SchemaFile != "" && !filepath.IsAbs(s.SchemaFile) {
				s.SchemaFile = filepath.Join(dir, s.SchemaFile)
			}
		}
	}
	cfg.origin = o
	return cfg, nil
}

// parser checks a config document against Config's yaml tags.
type parser struct {
	*origins
	keyAt map[int]string // line → the deepest key whose value is on it, to name keys in type errors
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
				return &ConfigError{Key: full, From: p.at(kn.Line), Err: fmt.Errorf("key %s is given twice", full)}
			}
			seen[kn.Value] = true
			f, ok := fieldByKey(t, kn.Value)
			switch {
			case !ok && credentialKey(kn.Value):
				return &ConfigError{Key: full, From: p.at(kn.Line), Err: fmt.Errorf("key %s: %s", full, credentialsNote)}
			case !ok:
				return &ConfigError{Key: full, From: p.at(kn.Line), Err: fmt.Errorf("unknown key %s (known here: %s)", full, strings.Join(yamlKeys(t), ", "))}
			}
			p.lines[full] = v.Line
			p.scalar[full] = v.Kind != yaml.MappingNode && v.Kind != yaml.SequenceNode
			p.keyAt[v.Line] = full // a key's children come after it: the deepest key of a line wins
			if err := p.check(v, full, f.Type); err != nil {
				return err
			}
		}
	case t.Kind() == reflect.Slice && deref(t.Elem()).Kind() == reflect.Struct:
		if n.Kind != yaml.SequenceNode && n.ShortTag() != "!!null" {
			return &ConfigError{Key: path, From: p.at(n.Line), Err: fmt.Errorf("%s is a list, one mapping of %s per item", path, strings.Join(yamlKeys(deref(t.Elem())), ", "))}
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

// lineMsg splits "line 3: cannot unmarshal …" into 3 and the rest.
var lineMsg = regexp.MustCompile(`^line ([0-9]+): `)

// decodeError turns an error of yaml's Decode into a *ConfigError naming the
// key and line, from the first message (a user fixes one at a time).
func (p *parser) decodeError(err error) error {
	msg := err.Error()
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg = te.Errors[0]
	}
	m := lineMsg.FindStringSubmatch(msg)
	if m == nil {
		return &ConfigError{From: p.at(0), Err: err}
	}
	line, _ := strconv.Atoi(m[1])
	rest := msg[len(m[0]):]
	key := p.keyAt[line]
	if key != "" && !strings.HasPrefix(rest, key) {
		rest = key + ": " + rest
	}
	return &ConfigError{Key: key, From: p.at(line), Err: errors.New(rest)}
}

// overlay sets ov.Key in the document top to ov.Value, after checking that
// the value decodes on its own, so that a wrong one is reported as coming
// from ov.From.
func overlay(top *yaml.Node, ov Override) error {
	t, ok := keyType(ov.Key)
	if !ok {
		return &ConfigError{Key: ov.Key, From: ov.From, Err: fmt.Errorf("%s is not a configuration key", ov.Key)}
	}
	path := strings.Split(ov.Key, ".")
	alone := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	if err := setPath(alone, path, overrideNode(t, ov.Value)); err != nil {
		return &ConfigError{Key: ov.Key, From: ov.From, Err: err}
	}
	scratch := DefaultConfig()
	if err := alone.Decode(&scratch); err != nil {
		msg := err.Error()
		var te *yaml.TypeError
		if errors.As(err, &te) && len(te.Errors) > 0 {
			msg = te.Errors[0]
		}
		msg = lineMsg.ReplaceAllString(msg, "")
		if !strings.HasPrefix(msg, ov.Key) {
			msg = ov.Key + ": " + msg
		}
		return &ConfigError{Key: ov.Key, From: ov.From, Err: errors.New(msg)}
	}
	if err := setPath(top, path, overrideNode(t, ov.Value)); err != nil {
		return &ConfigError{Key: ov.Key, From: ov.From, Err: err}
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

// keyType is the type of the field at key path k of Config (sections
// included, streams' insides not).
func keyType(k string) (reflect.Type, bool) {
	if k == "" {
		return nil, false
	}
	t := reflect.TypeFor[Config]()
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

// YAML renders c as the YAML document LoadConfig reads back into the same
// Config: every section, each stream with its schema, durations and sizes
// in the file's forms. Secrets are shown as "[redacted]".
func (c Config) YAML() ([]byte, error) {
	n, err := renderNode(c)
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

// JSON renders c as one compact JSON object with the keys and values of
// YAML (JSON is YAML, so it also reads back). Secrets are shown as
// "[redacted]".
func (c Config) JSON() ([]byte, error) {
	n, err := renderNode(c)
	if err != nil {
		return nil, err
	}
	b, err := nodeJSON(nil, n)
	if err != nil {
		return nil, fmt.Errorf("render the configuration as JSON: %w", err)
	}
	return b, nil
}

// redacted is what a field tagged secret:"true" is rendered as.
const redacted = "[redacted]"

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
			v.SetString(redacted)
		}
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.String:
		cp := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := range cp.Len() {
			cp.Index(i).SetString(redacted)
		}
		if !v.IsNil() {
			v.Set(cp)
		}
	default:
		v.SetZero()
	}
}
