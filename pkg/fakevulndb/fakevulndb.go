// Package fakevulndb serves a Go vulnerability database in the format govulncheck reads
// over HTTP (https://go.dev/security/vuln/database: index/db.json, index/modules.json,
// index/vulns.json and ID/<id>.json, each gzipped), from entries a test names. No machine
// here reaches vuln.go.dev; the real govulncheck reads this one through -db.
package fakevulndb

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// Entry is one vulnerability: the Go module's Symbols (in Package; "Type.Method" for a
// method) are vulnerable below Fixed ("" for no fix).
type Entry struct {
	ID      string
	Aliases []string
	Summary string
	Module  string
	Package string
	Symbols []string
	// Fixed is a semantic version without its "v" (as the database writes it): "1.1.0".
	Fixed string
}

// DB is the database's HTTP handler. Requests counts what it answered, by path.
type DB struct {
	files    map[string][]byte
	requests atomic.Int64
}

// modified is every entry's and the database's modification time.
var modified = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Format(time.RFC3339)

// New makes the database of entries.
func New(entries ...Entry) *DB {
	type indexVuln struct {
		ID       string `json:"id"`
		Modified string `json:"modified"`
		Fixed    string `json:"fixed,omitempty"`
	}
	type indexModule struct {
		Path  string      `json:"path"`
		Vulns []indexVuln `json:"vulns"`
	}
	type vulnIndex struct {
		ID       string   `json:"id"`
		Modified string   `json:"modified"`
		Aliases  []string `json:"aliases,omitempty"`
	}
	d := &DB{files: map[string][]byte{}}
	byModule := map[string]*indexModule{}
	var modules []*indexModule
	vulns := []vulnIndex{}
	for _, e := range entries {
		m := byModule[e.Module]
		if m == nil {
			m = &indexModule{Path: e.Module}
			byModule[e.Module] = m
			modules = append(modules, m)
		}
		m.Vulns = append(m.Vulns, indexVuln{ID: e.ID, Modified: modified, Fixed: e.Fixed})
		vulns = append(vulns, vulnIndex{ID: e.ID, Modified: modified, Aliases: e.Aliases})
		events := []map[string]string{{"introduced": "0"}}
		if e.Fixed != "" {
			events = append(events, map[string]string{"fixed": e.Fixed})
		}
		d.put("ID/"+e.ID, map[string]any{
			"schema_version": "1.3.1", "id": e.ID, "modified": modified, "published": modified, "aliases": e.Aliases,
			"summary": e.Summary, "details": e.Summary,
			"affected": []any{map[string]any{
				"package":            map[string]string{"name": e.Module, "ecosystem": "Go"},
				"ranges":             []any{map[string]any{"type": "SEMVER", "events": events}},
				"ecosystem_specific": map[string]any{"imports": []any{map[string]any{"path": e.Package, "symbols": e.Symbols}}},
			}},
			"database_specific": map[string]string{"url": "https://pkg.go.dev/vuln/" + e.ID},
		})
	}
	slices.SortFunc(modules, func(a, b *indexModule) int { return strings.Compare(a.Path, b.Path) })
	d.put("index/db", map[string]string{"modified": modified})
	d.put("index/modules", modules)
	d.put("index/vulns", vulns)
	return d
}

// put stores v's JSON gzipped under name + ".json.gz".
func (d *DB) put(name string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only maps and slices of strings
	}
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	_, _ = zw.Write(b)
	_ = zw.Close()
	d.files["/"+name+".json.gz"] = z.Bytes()
}

// Requests is how many files the database served.
func (d *DB) Requests() int64 { return d.requests.Load() }

// ServeHTTP serves the database's files under any prefix ending in the file's path.
func (d *DB) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	for name, body := range d.files {
		if strings.HasSuffix(r.URL.Path, name) {
			d.requests.Add(1)
			w.Header().Set("Content-Type", "application/octet-stream")
			_, _ = w.Write(body)
			return
		}
	}
	http.NotFound(w, r)
}
