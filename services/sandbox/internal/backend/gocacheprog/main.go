// Command gocacheprog is the Go build cache of a sandbox: a GOCACHEPROG program that reads
// two layers and writes one. The shared layer is a read-only Go build cache (GOCACHE layout)
// that the sandbox service made once, when it built the sandbox's toolchain — the standard
// library compiled and vetted — so a new sandbox's first `go build` starts warm. The private
// layer is the sandbox's own and takes every new entry: nothing a sandbox builds, or plants,
// reaches the shared layer, so no sandbox can change what another one's build uses.
//
// It uses only the standard library and is built by the sandbox service with the sandbox's
// own Go toolchain (its source is embedded in package backend), then run by the go command as
//
//	GOCACHEPROG="/usr/local/bin/thefold-gocache -shared=/opt/thefold/gocache -private=/tmp/gocache/layer"
//
// The protocol is cmd/go/internal/cacheprog's: JSON requests on stdin, JSON responses on
// stdout, a put's body as a base64 JSON string on the line after the request.
package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// request and response are cmd/go/internal/cacheprog's Request and Response.
type request struct {
	ID       int64
	Command  string
	ActionID []byte `json:",omitempty"`
	OutputID []byte `json:",omitempty"`
	BodySize int64  `json:",omitempty"`
}

type response struct {
	ID            int64
	Err           string     `json:",omitempty"`
	KnownCommands []string   `json:",omitempty"`
	Miss          bool       `json:",omitempty"`
	OutputID      []byte     `json:",omitempty"`
	Size          int64      `json:",omitempty"`
	Time          *time.Time `json:",omitempty"`
	DiskPath      string     `json:",omitempty"`
}

// hashSize is the size of an action or output ID (cmd/go/internal/cache.HashSize).
const hashSize = 32

// entrySize is the size of an index entry: "v1 <action hex> <output hex> <size, 20 wide>
// <unix nanoseconds, 20 wide>\n", cmd/go/internal/cache's on-disk format, which both layers
// use so that the shared one is made by a plain GOCACHE build.
const entrySize = 2 + 1 + 2*hashSize + 1 + 2*hashSize + 1 + 20 + 1 + 20 + 1

func main() {
	shared := flag.String("shared", "", "read-only Go build cache (GOCACHE layout) consulted after the private one")
	private := flag.String("private", "", "writable directory that takes every new entry (required)")
	flag.Parse()
	if *private == "" {
		fmt.Fprintln(os.Stderr, "gocacheprog: -private is required")
		os.Exit(2)
	}
	c := &cache{shared: *shared, private: *private}
	if err := c.serve(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "gocacheprog:", err)
		os.Exit(1)
	}
}

// cache is the two layers. shared may be "" (no shared layer).
type cache struct {
	shared, private string
}

// serve answers the go command's requests on r until a close request or the end of r.
func (c *cache) serve(r io.Reader, w io.Writer) error {
	if err := os.MkdirAll(c.private, 0o755); err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	send := func(res *response) error {
		if err := enc.Encode(res); err != nil {
			return err
		}
		return bw.Flush()
	}
	if err := send(&response{KnownCommands: []string{"get", "put", "close"}}); err != nil {
		return err
	}
	dec := json.NewDecoder(bufio.NewReader(r))
	for {
		var req request
		if err := dec.Decode(&req); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("read request: %w", err)
		}
		var body []byte
		if req.Command == "put" && req.BodySize > 0 {
			if err := dec.Decode(&body); err != nil {
				return fmt.Errorf("read the body of put %d: %w", req.ID, err)
			}
		}
		res := c.handle(&req, body)
		if err := send(res); err != nil {
			return err
		}
		if req.Command == "close" {
			return nil
		}
	}
}

func (c *cache) handle(req *request, body []byte) *response {
	res := &response{ID: req.ID}
	var err error
	switch req.Command {
	case "get":
		err = c.get(req, res)
	case "put":
		err = c.put(req, body, res)
	case "close":
	default:
		err = fmt.Errorf("unknown command %q", req.Command)
	}
	if err != nil {
		res.Err = err.Error()
	}
	return res
}

// get looks the action up in the private layer, then in the shared one.
func (c *cache) get(req *request, res *response) error {
	if len(req.ActionID) != hashSize {
		return fmt.Errorf("get: action ID of %d bytes, want %d", len(req.ActionID), hashSize)
	}
	for _, dir := range []string{c.private, c.shared} {
		if dir == "" {
			continue
		}
		if found := lookup(dir, req.ActionID, res); found {
			return nil
		}
	}
	res.Miss = true
	return nil
}

// lookup fills res from dir's entry for action and reports whether there was a usable one:
// a well-formed index entry whose output file exists with the recorded size.
func lookup(dir string, action []byte, res *response) bool {
	b, err := os.ReadFile(fileName(dir, action, "a"))
	if err != nil || len(b) != entrySize {
		return false
	}
	if string(b[:3]) != "v1 " || b[3+2*hashSize] != ' ' || b[4+4*hashSize] != ' ' || b[5+4*hashSize+20] != ' ' || b[entrySize-1] != '\n' {
		return false
	}
	eid, err1 := hex.DecodeString(string(b[3 : 3+2*hashSize]))
	out, err2 := hex.DecodeString(string(b[4+2*hashSize : 4+4*hashSize]))
	size, err3 := strconv.ParseInt(strings.TrimSpace(string(b[5+4*hashSize:5+4*hashSize+20])), 10, 64)
	nsec, err4 := strconv.ParseInt(strings.TrimSpace(string(b[6+4*hashSize+20:entrySize-1])), 10, 64)
	if err := errors.Join(err1, err2, err3, err4); err != nil || !bytes.Equal(eid, action) || size < 0 {
		return false
	}
	path := fileName(dir, out, "d")
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() != size {
		return false
	}
	t := time.Unix(0, nsec)
	res.OutputID, res.Size, res.Time, res.DiskPath = out, size, &t, path
	return true
}

// put stores body in the private layer under its output ID and indexes it under the action.
func (c *cache) put(req *request, body []byte, res *response) error {
	if len(req.ActionID) != hashSize || len(req.OutputID) != hashSize {
		return fmt.Errorf("put: action and output IDs must be %d bytes", hashSize)
	}
	if int64(len(body)) != req.BodySize {
		return fmt.Errorf("put: body of %d bytes, BodySize %d", len(body), req.BodySize)
	}
	// The go command's output ID is the SHA-256 of the body; an entry whose body does not
	// match is refused rather than stored where a later build would trust it.
	if sum := sha256.Sum256(body); !bytes.Equal(sum[:], req.OutputID) {
		return errors.New("put: the body's SHA-256 is not its output ID")
	}
	path := fileName(c.private, req.OutputID, "d")
	if err := writeAtomic(path, body); err != nil {
		return err
	}
	entry := fmt.Sprintf("v1 %x %x %20d %20d\n", req.ActionID, req.OutputID, len(body), time.Now().UnixNano())
	if err := writeAtomic(fileName(c.private, req.ActionID, "a"), []byte(entry)); err != nil {
		return err
	}
	res.DiskPath = path
	return nil
}

// fileName is cmd/go/internal/cache's name for id's file of kind key ("a" index, "d" data).
func fileName(dir string, id []byte, key string) string {
	return filepath.Join(dir, fmt.Sprintf("%02x", id[0]), fmt.Sprintf("%x", id)+"-"+key)
}

// writeAtomic writes b to path through a temporary file and a rename, so that a reader
// never sees half a file.
func writeAtomic(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}
