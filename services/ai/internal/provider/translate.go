package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// toolInput checks a tool call's input is a JSON object; empty means {}.
func toolInput(raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage("{}"), nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, errors.New("tool input is not a JSON object")
	}
	return raw, nil
}

// toolInputMap decodes a tool call's input for SDKs that want a map.
func toolInputMap(raw json.RawMessage) (map[string]any, error) {
	raw, err := toolInput(raw)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// schemaObject decodes a tool's JSON Schema, which must be an object schema (all three
// APIs take the arguments of a call as one object). Empty means an object without
// properties.
func schemaObject(raw json.RawMessage) (map[string]json.RawMessage, error) {
	obj := map[string]json.RawMessage{}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		obj["type"] = json.RawMessage(`"object"`)
		obj["properties"] = json.RawMessage(`{}`)
		return obj, nil
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, errors.New("input schema is not a JSON object")
	}
	if t, ok := obj["type"]; ok {
		var s string
		if json.Unmarshal(t, &s) != nil || s != "object" {
			return nil, fmt.Errorf("input schema has type %s, want \"object\"", t)
		}
	}
	obj["type"] = json.RawMessage(`"object"`)
	return obj, nil
}

// schemaMap is schemaObject for SDKs that take the schema as a plain value.
func schemaMap(raw json.RawMessage) (map[string]any, error) {
	obj, err := schemaObject(raw)
	if err != nil {
		return nil, err
	}
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		var x any
		if err := json.Unmarshal(v, &x); err != nil {
			return nil, err
		}
		out[k] = x
	}
	return out, nil
}

func errBlock(i int, err error) error { return fmt.Errorf("block %d: %w", i, err) }
