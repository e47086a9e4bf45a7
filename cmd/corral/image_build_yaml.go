package main

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"

	"corral/pkg/apiv1"
)

// maxSpecNodes bounds the YAML nodes a spec may expand to, aliases
// followed, so that a "billion laughs" spec fails instead of eating memory.
const maxSpecNodes = 100_000

// specTypedKeys are the spec's keys whose values are numbers or booleans:
// the only places where YAML's own typing of a plain scalar is used.
var specTypedKeys = typedJSONKeys(reflect.TypeFor[apiv1.BuildSpec]())

// specYAMLToJSON converts a spec written in YAML (or JSON, which is YAML)
// to JSON for the apiv1 types' decoders. A scalar is kept as the exact text
// written, except under a numeric or boolean key: a string field gets "yes",
// "0755" or "3.10", never what YAML 1.1 would make of them (true, 493, 3.1).
func specYAMLToJSON(data []byte) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	c := &yamlConverter{}
	v, err := c.value(&doc, "")
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// yamlConverter turns a YAML node tree into JSON-able values.
type yamlConverter struct {
	nodes int
}

// value converts n, found under the mapping key key ("" at the top).
func (c *yamlConverter) value(n *yaml.Node, key string) (any, error) {
	if c.nodes++; c.nodes > maxSpecNodes {
		return nil, fmt.Errorf("more than %d YAML nodes (aliases included)", maxSpecNodes)
	}
	switch n.Kind {
	case 0:
		return nil, nil // an empty document
	case yaml.DocumentNode:
		return c.value(n.Content[0], key)
	case yaml.AliasNode:
		return c.value(n.Alias, key)
	case yaml.MappingNode:
		return c.mapping(n)
	case yaml.SequenceNode:
		list := make([]any, 0, len(n.Content))
		for _, item := range n.Content {
			v, err := c.value(item, key)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		return list, nil
	}
	return scalarValue(n, key)
}

func (c *yamlConverter) mapping(n *yaml.Node) (map[string]any, error) {
	m := make(map[string]any, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!merge" {
			return nil, fmt.Errorf("line %d: keys must be plain strings (no << merges)", k.Line)
		}
		if _, dup := m[k.Value]; dup {
			return nil, fmt.Errorf("line %d: %q given twice", k.Line, k.Value)
		}
		v, err := c.value(n.Content[i+1], k.Value)
		if err != nil {
			return nil, err
		}
		m[k.Value] = v
	}
	return m, nil
}

// scalarValue is nil for a YAML null, YAML's number or boolean under a
// typed key, and the text written anywhere else.
func scalarValue(n *yaml.Node, key string) (any, error) {
	if n.ShortTag() == "!!null" {
		return nil, nil
	}
	if !specTypedKeys[key] {
		return n.Value, nil
	}
	var v any
	if err := n.Decode(&v); err != nil {
		return nil, fmt.Errorf("line %d: %s: %w", n.Line, key, err)
	}
	return v, nil
}

// typedJSONKeys returns the JSON names of the number and boolean fields
// reachable from t.
func typedJSONKeys(t reflect.Type) map[string]bool {
	keys := map[string]bool{}
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] {
			return
		}
		seen[t] = true
		for f := range t.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			switch f.Type.Kind() {
			case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
				reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
				keys[name] = true
			}
			walk(f.Type)
		}
	}
	walk(t)
	return keys
}
