package fakevulndb_test

import (
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/thefold/thefold/pkg/fakevulndb"
)

// The database answers govulncheck's paths with gzipped JSON, under any prefix, and
// nothing else.
func TestServesTheIndexAndEntries(t *testing.T) {
	db := fakevulndb.New(fakevulndb.Entry{ID: "GO-2099-0001", Aliases: []string{"CVE-2099-0001"}, Summary: "s", Module: "example.test/dep",
		Package: "example.test/dep", Symbols: []string{"Hello"}, Fixed: "1.1.0"})
	srv := httptest.NewServer(db)
	defer srv.Close()
	get := func(path string, v any) int {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return resp.StatusCode
		}
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(zr)
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v: %s", path, err, b)
		}
		return resp.StatusCode
	}
	var modules []struct {
		Path  string
		Vulns []struct{ ID, Fixed string }
	}
	if get("/vulndb/index/modules.json.gz", &modules) != http.StatusOK || len(modules) != 1 || modules[0].Path != "example.test/dep" ||
		modules[0].Vulns[0].ID != "GO-2099-0001" || modules[0].Vulns[0].Fixed != "1.1.0" {
		t.Fatalf("modules: %+v", modules)
	}
	var entry struct {
		ID       string
		Affected []struct {
			Ranges []struct{ Events []map[string]string }
		}
	}
	if get("/vulndb/ID/GO-2099-0001.json.gz", &entry) != http.StatusOK || entry.ID != "GO-2099-0001" || entry.Affected[0].Ranges[0].Events[1]["fixed"] != "1.1.0" {
		t.Fatalf("entry: %+v", entry)
	}
	if code := get("/vulndb/ID/GO-2099-0002.json.gz", &entry); code != http.StatusNotFound {
		t.Fatalf("an unknown entry: %d", code)
	}
	if db.Requests() != 2 {
		t.Fatalf("requests: %d", db.Requests())
	}
}
