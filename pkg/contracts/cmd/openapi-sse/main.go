// Command openapi-sse describes the server-sent-events variant of the Watch routes in the
// OpenAPI document protoc-gen-openapiv2 wrote (it knows only gRPC's NDJSON stream): every
// GET route ending in ":watch" also produces text/event-stream, takes the Last-Event-ID
// header, and says how its events are framed. It rewrites the file in place, keeping the
// order of every key, so the document stays a readable diff. make generate runs it.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// The framing the gateway's edge writes (services/gateway/internal/edge/sse.go).
const sseDescription = `

**Server-sent events.** With ` + "`Accept: text/event-stream`" + ` the stream is served as server-sent events
instead of NDJSON, for EventSource: it opens with ` + "`retry: 3000`" + `; each message is one event whose
` + "`id:`" + ` is its cursor, ` + "`event:`" + ` its type and ` + "`data:`" + ` the message as JSON. Besides the service's own
event types: ` + "`heartbeat`" + ` (its id is the stream's cursor, so Last-Event-ID advances on a quiet filtered
stream), ` + "`end`" + ` (the watched resource is finished: the stream's last event; close the EventSource),
` + "`failure`" + ` (an error after the stream started; EventSource reconnects with the last id it saw) and
` + "`gap`" + ` (the Last-Event-ID of a reconnection had expired: the stream resumes from the oldest event kept).`

const lastEventIDDescription = "The id of the last event an EventSource saw: the stream resumes after it (it takes the place of after_id). EventSource sends it when it reconnects."

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: openapi-sse <swagger.json>")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "openapi-sse:", err)
		os.Exit(1)
	}
}

func run(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, err := Describe(raw)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o644)
}

// Describe returns the document with the SSE variant of its watch routes described.
func Describe(raw []byte) ([]byte, error) {
	var doc object
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	var paths object
	if err := doc.get("paths", &paths); err != nil {
		return nil, err
	}
	for _, p := range paths.keys {
		if !strings.HasSuffix(p, ":watch") {
			continue
		}
		var item object
		if err := paths.get(p, &item); err != nil {
			return nil, err
		}
		var op object
		if err := item.get("get", &op); err != nil || op.vals == nil {
			continue
		}
		var desc string
		if _, ok := op.vals["description"]; ok {
			_ = op.get("description", &desc)
		}
		if !strings.Contains(desc, "**Server-sent events.**") {
			if err := op.set("description", strings.TrimLeft(desc+sseDescription, "\n"), "operationId"); err != nil {
				return nil, err
			}
		}
		if err := op.set("produces", []string{"application/json", "text/event-stream"}, "responses"); err != nil {
			return nil, err
		}
		var params []map[string]any
		_ = op.get("parameters", &params)
		has := false
		for _, prm := range params {
			has = has || prm["name"] == "Last-Event-ID"
		}
		if !has {
			params = append(params, map[string]any{"name": "Last-Event-ID", "description": lastEventIDDescription,
				"in": "header", "required": false, "type": "string"})
			if err := op.set("parameters", params, ""); err != nil {
				return nil, err
			}
		}
		if err := item.set("get", op, ""); err != nil {
			return nil, err
		}
		if err := paths.set(p, item, ""); err != nil {
			return nil, err
		}
	}
	if err := doc.set("paths", paths, ""); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// object is a JSON object that keeps the order of its keys.
type object struct {
	keys []string
	vals map[string]json.RawMessage
}

func (o *object) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return fmt.Errorf("not a JSON object")
	}
	o.vals = map[string]json.RawMessage{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		k := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return err
		}
		if _, ok := o.vals[k]; !ok {
			o.keys = append(o.keys, k)
		}
		o.vals[k] = v
	}
	return nil
}

func (o object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		b.Write(o.vals[k])
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func (o object) get(k string, v any) error {
	raw, ok := o.vals[k]
	if !ok {
		return nil
	}
	return json.Unmarshal(raw, v)
}

// set sets k to v; a new key goes after the key named after ("" or absent: at the end).
func (o *object) set(k string, v any, after string) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	if o.vals == nil {
		o.vals = map[string]json.RawMessage{}
	}
	if _, ok := o.vals[k]; !ok {
		at := len(o.keys)
		for i, key := range o.keys {
			if key == after {
				at = i + 1
			}
		}
		o.keys = append(o.keys[:at], append([]string{k}, o.keys[at:]...)...)
	}
	o.vals[k] = bytes.TrimSpace(buf.Bytes())
	return nil
}
