// Package yamlerr decodes a YAML file into a struct and reports what is wrong with it in an
// operator's words: the line, the key or value, where in the file, and what to write instead.
//
// yaml.v3's own decoding errors name Go types ("cannot unmarshal !!str into []string") and
// stop at the first bad scalar of a kind. Decode walks the yaml.Node tree against the target
// type first, so every message is built from a node's position and the struct's yaml tags,
// and every problem is reported at once.
package yamlerr

import (
	"bytes"
	"encoding"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"reflect"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Document says what a file is, for the messages about the file as a whole.
type Document struct {
	// Empty is the whole message for an empty file: what it needs at least.
	Empty string
	// OneDocument ends the message for a file of several YAML documents: what to do.
	OneDocument string
}

// Decode decodes data, which must hold one YAML document, into out, a pointer to a struct
// whose fields carry yaml tags. Keys the struct does not have, values of the wrong kind and
// keys given twice are errors; all of them are returned, in file order.
func Decode(data []byte, out any, doc Document) []error {
	root, err := parseOne(data, doc)
	if err != nil {
		return []error{err}
	}
	w := walker{}
	w.value(root, reflect.TypeOf(out).Elem(), "", false)
	if len(w.errs) > 0 {
		return w.errs
	}
	if err := root.Decode(out); err != nil {
		// The walk mirrors yaml.v3's rules, so this is a case it does not know: yaml's words
		// are better than none.
		var te *yaml.TypeError
		if errors.As(err, &te) {
			errs := make([]error, len(te.Errors))
			for i, e := range te.Errors {
				errs[i] = errors.New(e)
			}
			return errs
		}
		return []error{err}
	}
	return nil
}

// ReadFile reads the file at path. Its error reads "cannot read <path>: <why>", the path
// said once (os names it too).
func ReadFile(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("cannot read %s: %w", path, err)
	}
	return data, nil
}

// Join makes errs one error, a line each, every line starting with prefix; nil when there
// are none.
func Join(prefix string, errs []error) error {
	wrapped := make([]error, len(errs))
	for i, err := range errs {
		wrapped[i] = fmt.Errorf("%s%w", prefix, err)
	}
	return errors.Join(wrapped...)
}

// parseOne returns the single document's root node.
func parseOne(data []byte, doc Document) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var first yaml.Node
	err := dec.Decode(&first)
	if errors.Is(err, io.EOF) || err == nil && IsNull(&first) {
		return nil, errors.New(doc.Empty)
	}
	if err != nil {
		return nil, SyntaxError(err)
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
		return first.Content[0], nil
	case err != nil:
		return nil, SyntaxError(err)
	default:
		return nil, fmt.Errorf("line %d: a second YAML document starts here; %s", next.Line, doc.OneDocument)
	}
}

// SyntaxError rewords a yaml.v3 parse error. Those have no type of their own, only the text
// "yaml: line N: what"; the line is where the enclosing block starts, which can be above the
// actual mistake, hence "from that line down".
func SyntaxError(err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if !strings.HasPrefix(msg, "line ") {
		return fmt.Errorf("invalid YAML: %s", msg)
	}
	return fmt.Errorf("invalid YAML: %s; check the indentation and quoting from that line down", msg)
}

// IsNull reports whether n is absent or a YAML null (an empty document, "~", "null").
func IsNull(n *yaml.Node) bool {
	if n.Kind == yaml.DocumentNode {
		return len(n.Content) == 0 || IsNull(n.Content[0])
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		return IsNull(n.Alias)
	}
	return n.Kind == 0 || n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// Describe names a node's value for a message: "a mapping (key: value pairs)", "a list", or
// the scalar itself, unquoted.
func Describe(n *yaml.Node) string {
	n = resolve(n)
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping (key: value pairs)"
	case yaml.SequenceNode:
		return "a list"
	}
	return n.Value
}

func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

var (
	nodeType            = reflect.TypeFor[yaml.Node]()
	unmarshalerType     = reflect.TypeFor[yaml.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
	durationType        = reflect.TypeFor[time.Duration]()
)

// walker checks a node tree against a Go type the way yaml.v3 decodes it.
type walker struct {
	errs []error
	// checked are the anchored nodes already checked against a type through an alias.
	checked map[aliasTarget]bool
}

type aliasTarget struct {
	n *yaml.Node
	t reflect.Type
}

// aliased reports whether the node alias n points at was checked against t already, and
// marks it checked: each anchored node is walked once per type, so a file of aliases to
// aliases ("billion laughs") costs no more than its size, and one that contains itself ends.
func (w *walker) aliased(n *yaml.Node, t reflect.Type) bool {
	k := aliasTarget{resolve(n), t}
	if w.checked[k] {
		return true
	}
	if w.checked == nil {
		w.checked = map[aliasTarget]bool{}
	}
	w.checked[k] = true
	return false
}

func (w *walker) addf(n *yaml.Node, format string, args ...any) {
	w.errs = append(w.errs, fmt.Errorf("line %d: "+format, append([]any{n.Line}, args...)...))
}

// value checks n against t. path is where n sits ("" for the top, "router.routes[2]"), and
// entry whether it is a list entry.
func (w *walker) value(n *yaml.Node, t reflect.Type, path string, entry bool) {
	if n.Kind == yaml.AliasNode {
		if w.aliased(n, t) {
			return
		}
		n = resolve(n)
	}
	if IsNull(n) || t == nodeType || t.Kind() == reflect.Interface {
		return
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return // its own rules; Decode reports what it returns
	}
	if reflect.PointerTo(t).Implements(textUnmarshalerType) {
		w.scalar(n, t)
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		w.value(n, t.Elem(), path, entry)
	case reflect.Struct:
		w.mapping(n, t, path, entry)
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			w.addf(n, "%s is not valid here; expected a mapping (key: value pairs)", Describe(n))
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			w.scalar(k, t.Key())
			w.value(v, t.Elem(), join(path, k.Value), false)
		}
	case reflect.Slice, reflect.Array:
		if n.Kind != yaml.SequenceNode {
			w.addf(n, "%s is not valid here; expected %s", Describe(n), expected(t))
			return
		}
		for i, e := range n.Content {
			w.value(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i), true)
		}
	default:
		w.scalar(n, t)
	}
}

// scalar checks a value of a scalar type by decoding it alone, so yaml.v3's own rules (what
// is a bool, an integer's range, a duration) decide.
func (w *walker) scalar(n *yaml.Node, t reflect.Type) {
	n = resolve(n)
	if n.Kind != yaml.ScalarNode || n.Decode(reflect.New(t).Interface()) != nil {
		w.addf(n, "%s is not valid here; expected %s", Describe(n), expected(t))
	}
}

// mapping checks a node decoded into the struct type t: a mapping of t's keys, each once.
func (w *walker) mapping(n *yaml.Node, t reflect.Type, path string, entry bool) {
	if n.Kind != yaml.MappingNode {
		if path != "" && !entry {
			w.addf(n, "the section %s must be a mapping (key: value pairs), not %s", path, Describe(n))
		} else {
			w.addf(n, "%s is not valid here; expected a mapping (key: value pairs)", Describe(n))
		}
		return
	}
	fields := map[string]reflect.Type{}
	keys := structKeys(t, fields)
	seen := map[string]int{}
	w.keys(n, t, path, entry, fields, keys, seen)
}

func (w *walker) keys(n *yaml.Node, t reflect.Type, path string, entry bool, fields map[string]reflect.Type,
	keys []string, seen map[string]int) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.Tag == "!!merge" {
			w.merge(v, t, path, entry, fields, keys, seen)
			continue
		}
		if line, dup := seen[k.Value]; dup {
			w.addf(k, "mapping key %q already defined at line %d; give each key once", k.Value, line)
			continue
		}
		seen[k.Value] = k.Line
		ft, ok := fields[k.Value]
		if !ok {
			w.addf(k, "unknown key %q %s; remove it or correct its spelling (valid keys: %s)",
				k.Value, section(path, entry), strings.Join(keys, ", "))
			continue
		}
		w.value(v, ft, join(path, k.Value), false)
	}
}

// merge checks the mappings a "<<" key merges in, as if they were written in place.
func (w *walker) merge(v *yaml.Node, t reflect.Type, path string, entry bool, fields map[string]reflect.Type,
	keys []string, seen map[string]int) {
	if v.Kind == yaml.AliasNode {
		if w.aliased(v, t) {
			return // merged already, or merging into itself
		}
		v = resolve(v)
	}
	switch v.Kind {
	case yaml.MappingNode:
		// Merged keys may be overridden, so they count as not yet seen.
		w.keys(v, t, path, entry, fields, keys, map[string]int{})
	case yaml.SequenceNode:
		for _, m := range v.Content {
			w.merge(m, t, path, entry, fields, keys, seen)
		}
	default:
		w.addf(v, "%s cannot be merged; \"<<\" takes a mapping or a list of them", Describe(v))
	}
}

// structKeys lists t's yaml keys in field order, inline structs' in place, and fills fields.
func structKeys(t reflect.Type, fields map[string]reflect.Type) []string {
	var keys []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case name == "-":
		case strings.Contains(","+opts+",", ",inline,"):
			keys = append(keys, structKeys(f.Type, fields)...)
		default:
			if name == "" {
				name = strings.ToLower(f.Name) // yaml.v3's default key
			}
			fields[name] = f.Type
			keys = append(keys, name)
		}
	}
	return keys
}

// Keys lists the yaml keys of struct type t in field order, an inline struct's in its place.
func Keys(t reflect.Type) []string {
	return structKeys(t, map[string]reflect.Type{})
}

// section says where a key sits: "at the top level", "under limits", "in a router.routes
// entry".
func section(path string, entry bool) string {
	switch {
	case path == "":
		return "at the top level"
	case entry:
		list := path[:strings.LastIndexByte(path, '[')]
		if i := strings.LastIndex(list, "]."); i >= 0 {
			list = list[i+2:] // name a nested list by its own key: "flows", not "sessions[0].flows"
		}
		return "in " + article(list) + " " + list + " entry"
	}
	return "under " + path
}

// article is "a" or "an"; "u" is left out because the names that start with one start with
// "you" (ue_to_upf_allowed wants "a").
func article(word string) string {
	if strings.ContainsRune("aeio", rune(word[0])) {
		return "an"
	}
	return "a"
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// expected says in words what a value of type t looks like.
func expected(t reflect.Type) string {
	switch {
	case reflect.PointerTo(t).Implements(textUnmarshalerType):
		return "a single value"
	case t == durationType:
		return `a duration, e.g. "10s"`
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		return `a list, e.g. [a, b] or one "- item" per line`
	case reflect.String:
		return "a single value"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Struct, reflect.Map:
		return "a mapping (key: value pairs)"
	}
	return t.String()
}
