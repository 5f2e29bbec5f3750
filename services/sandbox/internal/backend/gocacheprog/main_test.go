package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// exchange runs c.serve over the requests and returns its responses after the first (the
// capabilities).
func exchange(t *testing.T, c *cache, lines ...string) []response {
	t.Helper()
	var out bytes.Buffer
	if err := c.serve(strings.NewReader(strings.Join(lines, "\n")+"\n"), &out); err != nil {
		t.Fatalf("serve: %v", err)
	}
	dec := json.NewDecoder(&out)
	var caps response
	if err := dec.Decode(&caps); err != nil || caps.ID != 0 || strings.Join(caps.KnownCommands, ",") != "get,put,close" {
		t.Fatalf("first response %+v (%v), want ID 0 with get,put,close", caps, err)
	}
	var res []response
	for {
		var r response
		if err := dec.Decode(&r); err == io.EOF {
			return res
		} else if err != nil {
			t.Fatal(err)
		}
		res = append(res, r)
	}
}

func id(b byte) []byte { return bytes.Repeat([]byte{b}, hashSize) }

func putLines(reqID int64, action []byte, body string) []string {
	sum := sha256.Sum256([]byte(body))
	req, _ := json.Marshal(request{ID: reqID, Command: "put", ActionID: action, OutputID: sum[:], BodySize: int64(len(body))})
	lines := []string{string(req)}
	if body != "" {
		b, _ := json.Marshal([]byte(body))
		lines = append(lines, string(b))
	}
	return lines
}

func getLine(reqID int64, action []byte) string {
	b, _ := json.Marshal(request{ID: reqID, Command: "get", ActionID: action})
	return string(b)
}

func TestPutThenGetFromThePrivateLayer(t *testing.T) {
	c := &cache{private: t.TempDir()}
	lines := append(putLines(1, id(1), "compiled"), getLine(2, id(1)), getLine(3, id(2)))
	lines = append(lines, putLines(4, id(3), "")...) // an empty body has no body line
	lines = append(lines, getLine(5, id(3)), `{"ID":6,"Command":"close"}`)
	res := exchange(t, c, lines...)
	if len(res) != 6 {
		t.Fatalf("got %d responses, want 6: %+v", len(res), res)
	}
	put, hit, miss, empty := res[0], res[1], res[2], res[4]
	if put.ID != 1 || put.Err != "" || put.DiskPath == "" {
		t.Fatalf("put: %+v", put)
	}
	if b, err := os.ReadFile(put.DiskPath); err != nil || string(b) != "compiled" {
		t.Fatalf("put's DiskPath holds %q (%v)", b, err)
	}
	sum := sha256.Sum256([]byte("compiled"))
	if hit.ID != 2 || hit.Miss || !bytes.Equal(hit.OutputID, sum[:]) || hit.Size != 8 || hit.DiskPath != put.DiskPath || hit.Time == nil {
		t.Fatalf("get after put: %+v", hit)
	}
	if miss.ID != 3 || !miss.Miss {
		t.Fatalf("get of an unknown action: %+v, want a miss", miss)
	}
	if empty.Miss || empty.Size != 0 || empty.DiskPath == "" {
		t.Fatalf("get of an empty body: %+v", empty)
	}
}

// The shared layer answers what the private one lacks, and a put never writes into it.
func TestSharedLayerIsReadOnly(t *testing.T) {
	shared := t.TempDir()
	exchange(t, &cache{private: shared}, putLines(1, id(7), "std")...)
	before := tree(t, shared)

	c := &cache{shared: shared, private: t.TempDir()}
	lines := append([]string{getLine(1, id(7))}, putLines(2, id(7), "planted")...)
	lines = append(lines, getLine(3, id(7)))
	res := exchange(t, c, lines...)
	if res[0].Miss || !strings.HasPrefix(res[0].DiskPath, shared) {
		t.Fatalf("get of a shared entry: %+v", res[0])
	}
	// The sandbox's own put shadows the shared entry for itself only.
	if !strings.HasPrefix(res[2].DiskPath, c.private) {
		t.Fatalf("get after a private put: %+v, want the private entry", res[2])
	}
	if after := tree(t, shared); after != before {
		t.Fatalf("the shared layer changed:\nbefore %s\nafter  %s", before, after)
	}
	// Another sandbox over the same shared layer still gets the shared entry.
	other := exchange(t, &cache{shared: shared, private: t.TempDir()}, getLine(1, id(7)))
	if b, err := os.ReadFile(other[0].DiskPath); err != nil || string(b) != "std" {
		t.Fatalf("another sandbox reads %q (%v), want the shared entry", b, err)
	}
}

// Malformed requests get an error each and leave the cache serving.
func TestMalformedRequests(t *testing.T) {
	c := &cache{private: t.TempDir()}
	badOut, _ := json.Marshal(request{ID: 2, Command: "put", ActionID: id(1), OutputID: id(9), BodySize: 3})
	res := exchange(t, c,
		`{"ID":1,"Command":"get","ActionID":"AAEC"}`, // three bytes
		string(badOut), `"YWJj"`, // body "abc" whose hash is not id(9)
		`{"ID":3,"Command":"frobnicate"}`,
		getLine(4, id(1)),
	)
	for i, want := range []string{"action ID of 3 bytes", "SHA-256 is not its output ID", `unknown command "frobnicate"`} {
		if !strings.Contains(res[i].Err, want) {
			t.Errorf("response %d: %+v, want an error containing %q", i, res[i], want)
		}
	}
	if !res[3].Miss {
		t.Errorf("the refused put was stored: %+v", res[3])
	}
}

// A corrupt entry (an index whose data file has another size, a truncated index) is a miss,
// not a build fed a wrong file.
func TestCorruptEntriesAreMisses(t *testing.T) {
	dir := t.TempDir()
	res := exchange(t, &cache{private: dir}, putLines(1, id(4), "abcdef")...)
	if err := os.WriteFile(res[0].DiskPath, []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := exchange(t, &cache{private: dir}, getLine(1, id(4))); !got[0].Miss {
		t.Errorf("entry with a short data file: %+v, want a miss", got[0])
	}
	if err := os.WriteFile(fileName(dir, id(4), "a"), []byte("v1 short\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := exchange(t, &cache{private: dir}, getLine(1, id(4))); !got[0].Miss {
		t.Errorf("truncated index entry: %+v, want a miss", got[0])
	}
}

// The go command itself, with a shared layer made by a plain GOCACHE build: a build of the
// same program takes the standard library from the shared layer (the private layer gets
// only the program's own entries) and the shared layer is left as it was. The program
// imports nothing (println): the runtime and its internal packages are two dozen entries
// to take from the shared layer, and the cold build that makes it compiles half of what
// fmt would need (the longest test of make test-unit with fmt: 13–83 s).
func TestGoCommandBuildsWarmFromTheSharedLayer(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go on PATH")
	}
	tmp := t.TempDir()
	helper := filepath.Join(tmp, "gocacheprog")
	if out, err := exec.Command(goBin, "build", "-o", helper, ".").CombinedOutput(); err != nil {
		t.Fatalf("build the helper: %v\n%s", err, out)
	}
	mod := filepath.Join(tmp, "mod")
	_ = os.MkdirAll(mod, 0o755)
	_ = os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module m\n\ngo 1.21\n"), 0o644)
	_ = os.WriteFile(filepath.Join(mod, "main.go"), []byte("package main\n\nfunc main() { println(\"hi\") }\n"), 0o644)
	shared := filepath.Join(tmp, "shared")
	env := append(os.Environ(), "GOFLAGS=-buildvcs=false", "GOWORK=off", "GOTOOLCHAIN=local", "GOPROXY=off", "CGO_ENABLED=0")
	run := func(extra ...string) {
		t.Helper()
		cmd := exec.Command(goBin, "build", "-o", filepath.Join(tmp, "out"), ".")
		cmd.Dir, cmd.Env = mod, append(env, extra...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build (%v): %v\n%s", extra, err, out)
		}
	}
	start := time.Now()
	run("GOCACHE=" + shared)
	t.Logf("cold build into the shared layer: %v", time.Since(start))
	before := tree(t, shared)

	private := filepath.Join(tmp, "private")
	_ = os.WriteFile(filepath.Join(mod, "main.go"), []byte("package main\n\nfunc main() { println(\"changed\") }\n"), 0o644)
	start = time.Now()
	run("GOCACHE="+filepath.Join(tmp, "gocache"), "GOCACHEPROG="+helper+" -shared="+shared+" -private="+private)
	t.Logf("warm build through the helper: %v", time.Since(start))
	if after := tree(t, shared); after != before {
		t.Fatal("the go command's build through the helper changed the shared layer")
	}
	if out, err := exec.Command(filepath.Join(tmp, "out")).CombinedOutput(); err != nil || string(out) != "changed\n" {
		t.Fatalf("the built program printed %q (%v)", out, err)
	}
	// The runtime and its dependencies are two dozen entries; the changed main package and
	// its link are a handful.
	if n := strings.Count(tree(t, private), "-a "); n == 0 || n > 8 {
		t.Errorf("the private layer has %d entries, want the program's own few (the standard library from the shared layer)", n)
	}
}

// tree lists dir's files with their sizes and modification times.
func tree(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		b.WriteString(strings.TrimPrefix(p, dir) + " " + fi.ModTime().String() + " " + strconv.FormatInt(fi.Size(), 10) + "\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
