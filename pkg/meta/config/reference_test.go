package config

import (
	"go/ast"
	goparser "go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// referencePath is the configuration reference, which must list every key.
const referencePath = "../../../docs/configuration.md"

// A key the config file accepts and the reference leaves out is a key a user
// can only find by reading the code. Every key is found from the code itself:
// the yaml tags of Config and every section below it, and the keys the
// sections' hand-written decoders name (the maintain: intervals, the tiers:
// settings, the cases of every UnmarshalYAML). Each must appear in the
// reference's YAML, at its place, with a comment saying what it means, or be
// named there as a dotted path (`limits.max_backlog`).
func TestTheConfigurationReferenceListsEveryKey(t *testing.T) {
	keys, sections := configKeys(t)
	for _, want := range []string{"listen", "limits.max_backlog", "streams[].name", "maintain.flush_every", "tiers.retention_grace", "control.profiles.*.root"} {
		if !slices.ContainsFunc(keys, func(k configKey) bool { return k.String() == want }) {
			t.Fatalf("the keys found in the code lack %s: the walk over Config is broken (found %v)", want, keys)
		}
	}
	for typ, names := range handNamedKeys(t) {
		paths := sections[typ]
		if len(paths) == 0 {
			t.Errorf("%s's decoder names keys %v, but no section of Config has that type; give the keys yaml tags in the section they belong to", typ, names)
			continue
		}
		for _, n := range names { // at the section's first place, where its keys are listed
			k := append(slices.Clone(paths[0]), n)
			if !slices.ContainsFunc(keys, func(c configKey) bool { return slices.Equal(c, k) }) {
				keys = append(keys, k)
			}
		}
	}

	doc, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatal(err)
	}
	blocks := yamlBlocks(t, string(doc))
	if len(blocks) == 0 {
		t.Fatalf("%s holds no ```yaml block", referencePath)
	}
	for _, k := range keys {
		if strings.Contains(string(doc), "`"+k.String()+"`") {
			continue
		}
		key, val := findKey(blocks, k)
		switch {
		case key == nil:
			t.Errorf("%s does not list the config key %s: add it to the reference's YAML, in its section, with its default and a comment saying what it means", referencePath, k)
		case !hasComment(key, val):
			t.Errorf("%s lists the config key %s without a comment: say what it means on its line", referencePath, k)
		}
	}
}

// configKey is a key's path: its keys from the top, "[]" for the items of a
// list of sections (streams[].name), "*" for any name of a mapping of
// sections (control.profiles.*.root).
type configKey []string

func (k configKey) String() string {
	return strings.ReplaceAll(strings.Join(k, "."), ".[]", "[]")
}

// configKeys walks Config's yaml tags and returns every key path, and, for
// each named section type, the paths it sits at. A section type met a
// second time (a profile's s3: and tiers:) is listed at its own path only:
// its keys are those of the section where it first appears.
func configKeys(t *testing.T) ([]configKey, map[string][]configKey) {
	t.Helper()
	var keys []configKey
	sections := map[string][]configKey{}
	walked := map[reflect.Type]bool{}
	var walk func(prefix configKey, typ reflect.Type)
	walk = func(prefix configKey, typ reflect.Type) {
		for _, name := range yamlKeys(typ) {
			f, _ := fieldByKey(typ, name)
			path := append(slices.Clone(prefix), name)
			keys = append(keys, path)
			ft := deref(f.Type)
			var inner configKey
			switch {
			case ft.Kind() == reflect.Struct:
				inner = path
			case isSectionList(ft), isSectionMap(ft):
				ft = deref(ft.Elem())
				inner = append(slices.Clone(path), map[bool]string{true: "[]", false: "*"}[isSectionList(f.Type)])
			default:
				continue
			}
			sections[ft.Name()] = append(sections[ft.Name()], inner)
			if walked[ft] {
				continue
			}
			walked[ft] = true
			walk(inner, ft)
		}
	}
	walk(nil, reflect.TypeFor[Config]())
	return keys, sections
}

// handNamedKeys returns, per section type, the keys its hand-written
// decoding names: the maintain: intervals, the tiers: settings, and the
// string cases of `switch key` and the `key == "…"` tests in every
// UnmarshalYAML of this package.
func handNamedKeys(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	add := func(typ, k string) {
		if !slices.Contains(out[typ], k) {
			out[typ] = append(out[typ], k)
		}
	}
	for _, iv := range (&Maintain{}).intervals() {
		add("Maintain", iv.key)
	}
	for _, s := range (&Tiers{}).settings(nil) {
		add("Tiers", s.key)
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := goparser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Name.Name != "UnmarshalYAML" || fn.Recv == nil || fn.Body == nil {
				continue
			}
			recv := fn.Recv.List[0].Type
			if star, ok := recv.(*ast.StarExpr); ok {
				recv = star.X
			}
			typ := recv.(*ast.Ident).Name
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.SwitchStmt:
					if isIdent(n.Tag, "key") {
						for _, c := range n.Body.List {
							for _, e := range c.(*ast.CaseClause).List {
								if s, ok := stringLit(e); ok {
									add(typ, s)
								}
							}
						}
					}
				case *ast.BinaryExpr:
					if n.Op == token.EQL && isIdent(n.X, "key") {
						if s, ok := stringLit(n.Y); ok {
							add(typ, s)
						}
					}
				}
				return true
			})
		}
	}
	return out
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

func stringLit(e ast.Expr) (string, bool) {
	l, ok := e.(*ast.BasicLit)
	if !ok || l.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(l.Value)
	return s, err == nil
}

var yamlFence = regexp.MustCompile("(?ms)^```yaml\n(.*?)^```")

// yamlBlocks parses each ```yaml block of a Markdown document.
func yamlBlocks(t *testing.T, doc string) []*yaml.Node {
	t.Helper()
	var out []*yaml.Node
	for _, m := range yamlFence.FindAllStringSubmatch(doc, -1) {
		var n yaml.Node
		if err := yaml.Unmarshal([]byte(m[1]), &n); err != nil {
			t.Fatalf("%s: a yaml block does not parse: %v\n%s", referencePath, err, m[1])
		}
		if len(n.Content) > 0 {
			out = append(out, n.Content[0])
		}
	}
	return out
}

// findKey finds the key node at path k in any of the blocks, and its value.
func findKey(blocks []*yaml.Node, k configKey) (key, val *yaml.Node) {
	var find func(n *yaml.Node, rest configKey) (*yaml.Node, *yaml.Node)
	find = func(n *yaml.Node, rest configKey) (*yaml.Node, *yaml.Node) {
		switch {
		case rest[0] == "[]" && n.Kind == yaml.SequenceNode:
			for _, item := range n.Content {
				if k, v := find(item, rest[1:]); k != nil {
					return k, v
				}
			}
		case rest[0] == "*" && n.Kind == yaml.MappingNode:
			for i := 1; i < len(n.Content); i += 2 {
				if k, v := find(n.Content[i], rest[1:]); k != nil {
					return k, v
				}
			}
		case n.Kind == yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value != rest[0] {
					continue
				}
				if len(rest) == 1 {
					return n.Content[i], n.Content[i+1]
				}
				return find(n.Content[i+1], rest[1:])
			}
		}
		return nil, nil
	}
	for _, b := range blocks {
		if key, val := find(b, k); key != nil {
			return key, val
		}
	}
	return nil, nil
}

// hasComment reports whether a key of the reference says what it means: a
// comment on its line or the line above it.
func hasComment(key, val *yaml.Node) bool {
	return key.HeadComment != "" || key.LineComment != "" || val.LineComment != "" || val.HeadComment != "" && val.Kind == yaml.ScalarNode
}
