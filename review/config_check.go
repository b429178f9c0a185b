package review

import (
	"fmt"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/gilf-review/gilf/validation"
)

// ConfigError is one problem of a repository's .github/gilf.yml, as the
// check run shows it to the people who maintain the file: where it is,
// which key, what is wrong and what is allowed.
type ConfigError struct {
	Line    int    // 1-based; 0 when the problem is the whole file
	Key     string // dotted path, "execution.mode"; "" for the whole file
	Problem string
	Allowed string // what may stand there; "" when the problem says it
}

func (e ConfigError) Error() string {
	var b strings.Builder
	b.WriteString(ConfigPath)
	if e.Line > 0 {
		fmt.Fprintf(&b, " line %d", e.Line)
	}
	if e.Key != "" {
		fmt.Fprintf(&b, ", %s", e.Key)
	}
	b.WriteString(": " + e.Problem)
	if e.Allowed != "" {
		b.WriteString(" (allowed: " + e.Allowed + ")")
	}
	return b.String()
}

// MaxConfigErrors is how many problems of one file are reported; the
// rest are counted.
const MaxConfigErrors = 20

// checkSchema walks the parsed document against the shape of v's type
// (yaml tags name the keys) and returns every problem it finds, with no
// Go type name in any of them.
func checkSchema(doc *yaml.Node, t reflect.Type) []ConfigError {
	var errs []ConfigError
	if doc == nil || doc.Kind == 0 {
		return nil
	}
	if doc.Kind == yaml.DocumentNode {
		if len(doc.Content) == 0 {
			return nil
		}
		doc = doc.Content[0]
	}
	if doc.Kind == yaml.ScalarNode && doc.Tag == "!!null" {
		return nil
	}
	walk(doc, t, "", &errs)
	return errs
}

func walk(n *yaml.Node, t reflect.Type, path string, errs *[]ConfigError) {
	if n.Kind == yaml.AliasNode {
		add(errs, n, path, "YAML aliases are not supported in this file", "")
		return
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			add(errs, n, path, "expected a mapping of keys, found "+kindWords(n), strings.Join(keysOf(t), ", "))
			return
		}
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			key := join(path, k.Value)
			f, ok := fieldByTag(t, k.Value)
			switch {
			case k.Kind != yaml.ScalarNode:
				add(errs, k, path, "a key must be a plain word", strings.Join(keysOf(t), ", "))
			case !ok:
				add(errs, k, key, "unknown key"+closest(k.Value, keysOf(t)), strings.Join(keysOf(t), ", "))
			case seen[k.Value]:
				add(errs, k, key, "the key is given twice", "")
			default:
				seen[k.Value] = true
				walk(v, f.Type, key, errs)
			}
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			add(errs, n, path, "expected a mapping of NAME: value, found "+kindWords(n), "")
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
				add(errs, k, join(path, k.Value), "expected NAME: value with a plain value", "a string, number or boolean")
			}
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			add(errs, n, path, "expected a list, found "+kindWords(n), "a list like [main, 'release/*']")
			return
		}
		for _, item := range n.Content {
			walk(item, t.Elem(), path, errs)
		}
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
			add(errs, n, path, "expected true or false, found "+valueWords(n), "true, false")
		}
	case reflect.Int, reflect.Int64:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
			add(errs, n, path, "expected a whole number, found "+valueWords(n), "")
		}
	case reflect.String:
		if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
			add(errs, n, path, "expected a string, found "+valueWords(n), "")
		}
	}
}

func add(errs *[]ConfigError, n *yaml.Node, key, problem, allowed string) {
	*errs = append(*errs, ConfigError{Line: n.Line, Key: key, Problem: problem, Allowed: allowed})
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func fieldByTag(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if tagName(f) == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func tagName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	return name
}

func keysOf(t reflect.Type) []string {
	var keys []string
	for i := range t.NumField() {
		if name := tagName(t.Field(i)); name != "" && name != "-" {
			keys = append(keys, name)
		}
	}
	return keys
}

func kindWords(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return valueWords(n)
}

// valueWords names what was found, quoting at most a short value.
func valueWords(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode, yaml.SequenceNode:
		return kindWords(n)
	}
	if n.Tag == "!!null" {
		return "nothing"
	}
	v := n.Value
	if len(v) > 40 {
		v = v[:40] + "…"
	}
	return fmt.Sprintf("%q", v)
}

// closest suggests the known key nearest a misspelled one, when one is
// within two edits.
func closest(key string, known []string) string {
	best, d := validation.Closest(key, known)
	if best == "" || d > 2 {
		return ""
	}
	return fmt.Sprintf(" (did you mean %s?)", best)
}

// lineOf finds the line of a dotted key in the document, 0 when absent.
func lineOf(doc *yaml.Node, key string) int {
	n := doc
	if n != nil && n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line := 0
	for part := range strings.SplitSeq(key, ".") {
		if n == nil || n.Kind != yaml.MappingNode {
			return line
		}
		next := (*yaml.Node)(nil)
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == part {
				line, next = n.Content[i].Line, n.Content[i+1]
				break
			}
		}
		if next == nil {
			return line
		}
		n = next
	}
	return line
}
