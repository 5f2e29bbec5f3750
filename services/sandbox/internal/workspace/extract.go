package workspace

import (
	"archive/tar"
	"archive/zip"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/thefold/thefold/pkg/errs"
)

// Archive formats Extract reads.
const (
	FormatTarGz = "tar.gz"
	FormatTar   = "tar"
	FormatZip   = "zip"
)

// ExtractOptions shape Extract.
type ExtractOptions struct {
	// Format is FormatTarGz, FormatTar or FormatZip.
	Format string
	// StripTopDir drops the single top-level directory when every entry is under it, as
	// in GitHub's archives ("repo-<sha>/…").
	StripTopDir bool
	// Limits bound the archive; zero fields take the workspace's.
	Limits Limits
}

// entry is one archive member, checked.
type entry struct {
	name   string // clean workspace path, before stripping
	kind   byte   // 'f' file, 'd' directory, 'l' symlink
	size   int64
	exec   bool
	target string // symlink target
	idx    int    // position among the archive's members
}

// walkFunc reads an archive's content once more, in order, handing each member's data to
// yield; the write pass uses it so that a tar is decompressed twice, not once per file.
type walkFunc func(yield func(idx int, r io.Reader) error) error

// Extract unpacks an uploaded archive into the workspace. Every entry is checked before
// anything is written, so an archive refused for its names, types or sizes leaves the
// workspace as it was (a link found leading outside only once created is removed with the
// archive's other links; files already written stay): names must be
// clean relative paths; symlinks must be relative and stay inside the workspace; hardlinks,
// devices and FIFOs are refused; files over MaxFileBytes, more than MaxFiles files or more
// than MaxTotalBytes in all are refused, counted from the bytes actually decompressed, so a
// decompression bomb stops at the limit. Files and directories are written first and
// symlinks last, and no write goes through a symlink, so an archive cannot use a link it
// carries to write elsewhere. Refusals are errs.ErrInvalid naming the entry.
//
// The archive is spooled to a temporary file (at most MaxTotalBytes plus tar's per-file
// overhead) because the check pass and the write pass both read it, and zip needs
// random access.
func Extract(w *Workspace, r io.Reader, opts ExtractOptions) error {
	l := opts.Limits
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = w.limits.MaxFileBytes
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = w.limits.MaxFiles
	}
	if l.MaxTotalBytes <= 0 {
		l.MaxTotalBytes = w.limits.MaxTotalBytes
	}
	switch opts.Format {
	case FormatTarGz, FormatTar, FormatZip:
	default:
		return fmt.Errorf("archive format %q: want %q, %q or %q: %w", opts.Format, FormatTarGz, FormatTar, FormatZip, errs.ErrInvalid)
	}

	spool, err := os.CreateTemp("", "thefold-archive-*")
	if err != nil {
		return fmt.Errorf("archive: %w", err)
	}
	defer os.Remove(spool.Name())
	defer spool.Close()
	maxArchive := l.MaxTotalBytes + int64(l.MaxFiles)*2048 + 1<<20
	n, err := io.Copy(spool, io.LimitReader(r, maxArchive+1))
	if err != nil {
		return fmt.Errorf("archive: %w", err)
	}
	if n > maxArchive {
		return fmt.Errorf("archive is over %d bytes: %w", maxArchive, errs.ErrInvalid)
	}

	var entries []entry
	var walk walkFunc
	switch opts.Format {
	case FormatZip:
		entries, walk, err = zipEntries(spool, n, l)
	default:
		entries, walk, err = tarEntries(spool, opts.Format == FormatTarGz, l)
	}
	if err != nil {
		return err
	}
	strip := ""
	if opts.StripTopDir {
		strip = commonTopDir(entries)
	}

	// Directories, then files, then links: see above.
	var links []entry
	files := map[int]entry{}
	for _, e := range entries {
		if strip != "" {
			e.name = strings.TrimPrefix(strings.TrimPrefix(e.name, strip), "/")
			if e.name == "" {
				continue
			}
		}
		switch e.kind {
		case 'l':
			if err := checkLinkTarget(e.name, e.target); err != nil {
				return err
			}
			links = append(links, e)
		case 'f':
			files[e.idx] = e
		case 'd':
			if err := w.mkdirNoLinks(e.name); err != nil {
				return fmt.Errorf("archive entry %q: %w", e.name, err)
			}
		}
	}
	err = walk(func(idx int, r io.Reader) error {
		e, ok := files[idx]
		if !ok {
			return nil
		}
		return w.writeEntry(e, r, l)
	})
	if err != nil {
		return err
	}
	return w.extractLinks(links)
}

// extractLinks creates the archive's symlinks, then resolves each as the kernel would:
// the lexical check of one target cannot see a chain ("a" → ".", "b" → "a/..") climbing
// out, nor a link the workspace already had. When one leads outside, all are removed.
func (w *Workspace) extractLinks(links []entry) error {
	var made []string
	undo := func() {
		for _, p := range made {
			_ = w.fsys.Remove(p)
		}
	}
	for _, e := range links {
		if err := w.mkdirNoLinks(path.Dir(e.name)); err != nil {
			undo()
			return fmt.Errorf("archive entry %q: %w", e.name, err)
		}
		if err := w.fsys.Symlink(e.target, e.name); err != nil {
			undo()
			return fmt.Errorf("archive entry %q: %v: %w", e.name, err, errs.ErrInvalid)
		}
		made = append(made, e.name)
	}
	for _, e := range links {
		if _, err := w.Resolve(e.name); err != nil {
			undo()
			return fmt.Errorf("archive entry %q: symlink to %q: %w", e.name, e.target, err)
		}
	}
	return nil
}

func (w *Workspace) writeEntry(e entry, r io.Reader, l Limits) error {
	name := e.name
	// The check pass counted these bytes; the bound holds again should the reader disagree.
	lr := &io.LimitedReader{R: r, N: l.MaxFileBytes + 1}
	if _, err := w.writeFrom(name, lr, e.exec); err != nil {
		return fmt.Errorf("archive entry %q: %w", name, err)
	}
	if lr.N == 0 {
		_ = w.fsys.Remove(name)
		return fmt.Errorf("archive entry %q: over the %d-byte file limit: %w", name, l.MaxFileBytes, errs.ErrInvalid)
	}
	return nil
}

// tarEntries reads the whole archive once, checking every entry and counting the bytes
// really decompressed.
func tarEntries(f *os.File, gz bool, l Limits) ([]entry, walkFunc, error) {
	open := func() (*tar.Reader, func(), error) {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return nil, nil, err
		}
		if !gz {
			return tar.NewReader(f), func() {}, nil
		}
		zr, err := gzip.NewReader(f)
		if err != nil {
			return nil, nil, fmt.Errorf("archive is not gzip: %v: %w", err, errs.ErrInvalid)
		}
		return tar.NewReader(zr), func() { _ = zr.Close() }, nil
	}
	tr, done, err := open()
	if err != nil {
		return nil, nil, err
	}
	defer done()
	c := counter{l: l}
	var entries []entry
	for i := 0; ; i++ {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("archive: %v: %w", err, errs.ErrInvalid)
		}
		e := entry{size: h.Size, exec: h.Mode&0o111 != 0, target: h.Linkname, idx: i}
		switch h.Typeflag {
		case tar.TypeReg, tar.TypeRegA:
			e.kind = 'f'
		case tar.TypeDir:
			e.kind = 'd'
		case tar.TypeSymlink:
			e.kind = 'l'
		case tar.TypeXGlobalHeader:
			continue
		case tar.TypeLink:
			return nil, nil, fmt.Errorf("archive entry %q: hardlinks are not accepted: %w", h.Name, errs.ErrInvalid)
		default:
			return nil, nil, fmt.Errorf("archive entry %q: type %q (device, FIFO or other special file) is not accepted: %w", h.Name, h.Typeflag, errs.ErrInvalid)
		}
		if e.name, err = entryName(h.Name); err != nil {
			return nil, nil, err
		}
		if e.kind == 'f' {
			// Counted from what the reader yields, not from the header's claim.
			if e.size, err = c.consume(h.Name, tr); err != nil {
				return nil, nil, err
			}
		}
		if e.name == "" {
			if e.kind != 'd' {
				return nil, nil, fmt.Errorf("archive entry %q: a file named as the root: %w", h.Name, errs.ErrInvalid)
			}
			continue
		}
		entries = append(entries, e)
	}
	walk := func(yield func(int, io.Reader) error) error {
		tr, done, err := open()
		if err != nil {
			return err
		}
		defer done()
		for i := 0; ; i++ {
			if _, err := tr.Next(); err == io.EOF {
				return nil
			} else if err != nil {
				return fmt.Errorf("archive: %v: %w", err, errs.ErrInvalid)
			}
			if err := yield(i, tr); err != nil {
				return err
			}
		}
	}
	return entries, walk, nil
}

func zipEntries(f *os.File, size int64, l Limits) ([]entry, walkFunc, error) {
	zr, err := zip.NewReader(f, size)
	if err != nil {
		return nil, nil, fmt.Errorf("archive is not a zip: %v: %w", err, errs.ErrInvalid)
	}
	c := counter{l: l}
	var entries []entry
	for i, zf := range zr.File {
		m := zf.Mode()
		e := entry{exec: m&0o111 != 0, idx: i}
		switch {
		case m.IsDir():
			e.kind = 'd'
		case m&fs.ModeSymlink != 0:
			e.kind = 'l'
		case m.IsRegular():
			e.kind = 'f'
		default:
			return nil, nil, fmt.Errorf("archive entry %q: %s is not accepted: %w", zf.Name, kind(m), errs.ErrInvalid)
		}
		if e.name, err = entryName(zf.Name); err != nil {
			return nil, nil, err
		}
		if e.name == "" {
			if e.kind != 'd' {
				return nil, nil, fmt.Errorf("archive entry %q: a file named as the root: %w", zf.Name, errs.ErrInvalid)
			}
			continue
		}
		rc, err := zf.Open()
		if err != nil {
			return nil, nil, fmt.Errorf("archive entry %q: %v: %w", zf.Name, err, errs.ErrInvalid)
		}
		if e.kind == 'l' {
			t, err := io.ReadAll(io.LimitReader(rc, 4097))
			_ = rc.Close()
			if err != nil || len(t) > 4096 {
				return nil, nil, fmt.Errorf("archive entry %q: bad symlink target: %w", zf.Name, errs.ErrInvalid)
			}
			e.target = string(t)
		} else if e.kind == 'f' {
			n, err := c.consume(e.name, rc)
			_ = rc.Close()
			if err != nil {
				return nil, nil, err
			}
			e.size = n
		} else {
			_ = rc.Close()
		}
		entries = append(entries, e)
	}
	walk := func(yield func(int, io.Reader) error) error {
		for i, zf := range zr.File {
			if !zf.Mode().IsRegular() {
				continue
			}
			rc, err := zf.Open()
			if err != nil {
				return fmt.Errorf("archive entry %q: %v: %w", zf.Name, err, errs.ErrInvalid)
			}
			err = yield(i, rc)
			_ = rc.Close()
			if err != nil {
				return err
			}
		}
		return nil
	}
	return entries, walk, nil
}

// counter enforces the limits on the bytes an archive really decompresses to.
type counter struct {
	l     Limits
	files int
	total int64
}

func (c *counter) consume(name string, r io.Reader) (int64, error) {
	if c.files++; c.files > c.l.MaxFiles {
		return 0, fmt.Errorf("archive has more than %d files: %w", c.l.MaxFiles, errs.ErrInvalid)
	}
	n, err := io.Copy(io.Discard, io.LimitReader(r, c.l.MaxFileBytes+1))
	if err != nil {
		return 0, fmt.Errorf("archive entry %q: %v: %w", name, err, errs.ErrInvalid)
	}
	if n > c.l.MaxFileBytes {
		return 0, fmt.Errorf("archive entry %q: over the %d-byte file limit: %w", name, c.l.MaxFileBytes, errs.ErrInvalid)
	}
	if c.total += n; c.total > c.l.MaxTotalBytes {
		return 0, fmt.Errorf("archive unpacks to more than %d bytes: %w", c.l.MaxTotalBytes, errs.ErrInvalid)
	}
	return n, nil
}

// entryName turns an archive member's name into a clean workspace path ("" for the
// archive's root): "./" prefixes and a directory's trailing '/' are dropped.
func entryName(name string) (string, error) {
	n := strings.TrimSuffix(name, "/")
	for strings.HasPrefix(n, "./") {
		n = n[2:]
	}
	if n == "." || n == "" {
		return "", nil
	}
	clean, err := CleanPath(n)
	if err != nil {
		return "", fmt.Errorf("archive entry %q: %w", name, err)
	}
	return clean, nil
}

// checkLinkTarget refuses a symlink whose target is absolute or leaves the workspace from
// where the link sits.
func checkLinkTarget(name, target string) error {
	if target == "" || strings.IndexByte(target, 0) >= 0 || path.IsAbs(target) {
		return fmt.Errorf("archive entry %q: symlink to %q: targets must be relative and inside the workspace: %w", name, target, errs.ErrInvalid)
	}
	p := path.Join(path.Dir(name), target)
	if p == ".." || strings.HasPrefix(p, "../") {
		return fmt.Errorf("archive entry %q: symlink to %q leads outside the workspace: %w", name, target, errs.ErrInvalid)
	}
	return nil
}

// commonTopDir returns the first path component every entry shares, when it is a
// directory (some entry is below it), else "".
func commonTopDir(entries []entry) string {
	top, below := "", false
	for _, e := range entries {
		first, rest, deeper := strings.Cut(e.name, "/")
		switch {
		case top == "":
			top = first
		case first != top:
			return ""
		}
		if !deeper && e.kind != 'd' {
			return "" // the top is a file or a link itself
		}
		if deeper && rest != "" {
			below = true
		}
	}
	if !below {
		return ""
	}
	return top
}
