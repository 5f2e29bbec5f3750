package analysis

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"path"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/thefold/thefold/pkg/errs"
	"github.com/thefold/thefold/pkg/validate"
)

// Bounds of an archive given to ArchiveSource.
const (
	// MaxArchiveFiles bounds the regular files of an archive.
	MaxArchiveFiles = 200000
	// MaxArchiveBytes bounds the bytes an archive decompresses to (a gzip bomb stops here).
	MaxArchiveBytes = 1 << 30
	// MaxArchiveFileBytes is the largest file whose content is kept; a larger source file
	// is listed but left out of the graph, as the sandbox's reads leave it out.
	MaxArchiveFileBytes = 1 << 20
)

// ArchiveSource is the workspace an uploaded archive holds: a tar, optionally
// gzip-compressed (detected from its first bytes), read at the repository root. The
// archive is read once, keeping the content of the files the graph reads; directories,
// links and other non-regular entries are left out. An archive that is not a tar, has an
// entry whose name is not a clean relative path, or exceeds the bounds above is an
// InvalidArgument error naming the archive field.
func ArchiveSource(data []byte) (Source, error) {
	var r io.Reader = bytes.NewReader(data)
	if len(data) >= 2 && data[0] == 0x1f && data[1] == 0x8b {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, errs.Invalid("archive", "not a gzip stream: %v", err)
		}
		defer zr.Close()
		r = zr
	}
	lr := &io.LimitedReader{R: r, N: MaxArchiveBytes + 1}
	tr := tar.NewReader(lr)
	src := &archiveSource{content: map[string]string{}}
	seen := map[string]bool{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if lr.N <= 0 {
			return nil, errs.Invalid("archive", "decompresses to more than %d bytes", MaxArchiveBytes)
		}
		if err != nil {
			return nil, errs.Invalid("archive", "not a readable tar archive: %v", err)
		}
		name := strings.TrimPrefix(h.Name, "./")
		if h.Typeflag == tar.TypeDir {
			continue
		}
		if h.Typeflag != tar.TypeReg {
			continue // links, devices: nothing the graph reads
		}
		if name == "" || path.IsAbs(name) || path.Clean(name) != name || name == ".." || strings.HasPrefix(name, "../") {
			return nil, errs.Invalid("archive", "entry %q: want a clean relative path", validate.Truncate(h.Name, 80))
		}
		if seen[name] {
			continue // a later entry of the same name: tar keeps the last, the graph one
		}
		seen[name] = true
		if len(src.paths) >= MaxArchiveFiles {
			return nil, errs.Invalid("archive", "more than %d files", MaxArchiveFiles)
		}
		src.paths = append(src.paths, name)
		if !relevant(name) {
			continue
		}
		if h.Size > MaxArchiveFileBytes {
			src.tooLarge = append(src.tooLarge, name)
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			if lr.N <= 0 {
				return nil, errs.Invalid("archive", "decompresses to more than %d bytes", MaxArchiveBytes)
			}
			return nil, errs.Invalid("archive", "entry %q: %v", validate.Truncate(name, 80), err)
		}
		src.content[name] = string(b)
	}
	slices.Sort(src.paths)
	return src, nil
}

type archiveSource struct {
	paths    []string
	content  map[string]string
	tooLarge []string
}

func (a *archiveSource) List(context.Context) ([]string, error) { return a.paths, nil }

// Read returns a kept file's content. A file too large, or one the graph does not read,
// is an OutOfRange or NotFound status, which Analyze skips as it skips such a sandbox read.
func (a *archiveSource) Read(_ context.Context, p string) (string, error) {
	if c, ok := a.content[p]; ok {
		return c, nil
	}
	if slices.Contains(a.tooLarge, p) {
		return "", status.Errorf(codes.OutOfRange, "%s is over %d bytes", p, MaxArchiveFileBytes)
	}
	return "", status.Errorf(codes.NotFound, "%s: not in the archive", p)
}
