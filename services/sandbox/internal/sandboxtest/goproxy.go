// Package sandboxtest holds what the sandbox's tests in several packages need alike.
package sandboxtest

import (
	"archive/zip"
	"bytes"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
)

// ModuleOutput is what the module ModuleProxy serves prints from its Hello.
const ModuleOutput = "hello from a downloaded module"

// ModuleProxy serves example.test/dep v1.0.0 (package dep, func Hello() string) as a
// GOPROXY does, counting the downloads of its zip in zipHits.
func ModuleProxy(tb testing.TB, zipHits *atomic.Int32) http.Handler {
	tb.Helper()
	const mod = "module example.test/dep\n\ngo 1.22\n"
	var zb bytes.Buffer
	zw := zip.NewWriter(&zb)
	for name, content := range map[string]string{
		"go.mod": mod,
		"dep.go": "package dep\n\nfunc Hello() string { return \"" + ModuleOutput + "\" }\n",
	} {
		w, err := zw.Create("example.test/dep@v1.0.0/" + name)
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := w.Write([]byte(content)); err != nil {
			tb.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/example.test/dep/@v/list":
			fmt.Fprintln(w, "v1.0.0")
		case "/example.test/dep/@v/v1.0.0.info", "/example.test/dep/@latest":
			fmt.Fprint(w, `{"Version":"v1.0.0","Time":"2024-01-01T00:00:00Z"}`)
		case "/example.test/dep/@v/v1.0.0.mod":
			fmt.Fprint(w, mod)
		case "/example.test/dep/@v/v1.0.0.zip":
			zipHits.Add(1)
			w.Write(zb.Bytes())
		default:
			http.NotFound(w, r)
		}
	})
}
