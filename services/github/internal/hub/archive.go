package hub

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"

	"github.com/google/go-github/v84/github"

	"github.com/thefold/thefold/pkg/errs"
)

// Archive writes an uncompressed tar of a commit. GitHub serves a gzipped tarball (through
// a redirect to its archive host, fetched with the same authenticated client) whose paths
// sit under one top-level directory ("owner-repo-sha/") after a pax global header; the
// entries are rewritten relative to the repository root: directories, regular files and
// symlinks (anything else, e.g. a submodule's empty directory marker, is left out).
func (p *Provider) Archive(ctx context.Context, repo, commit string, w io.Writer) error {
	owner, name, err := splitRepo(repo)
	if err != nil {
		return err
	}
	subject := fmt.Sprintf("commit %q in %q", commit, repo)
	link, _, err := read(ctx, p, func(ctx context.Context) (_ string, resp *github.Response, err error) {
		u, resp, err := p.gh.Repositories.GetArchiveLink(ctx, owner, name, github.Tarball, &github.RepositoryContentGetOptions{Ref: commit}, 3)
		if err != nil {
			return "", resp, err
		}
		return u.String(), resp, nil
	})
	if err != nil {
		if isEmptyRepo(err) {
			return fmt.Errorf("repository %q is empty: %w", repo, errs.ErrNotFound)
		}
		return p.mapErr(ctx, err, subject)
	}
	req, err := p.gh.NewRequest(http.MethodGet, link, nil)
	if err != nil {
		return fmt.Errorf("github: archive link: %w", err)
	}
	req.Header.Set("Accept", "application/x-gzip, application/octet-stream")
	resp, err := readNoValue(ctx, p, func(ctx context.Context) (*github.Response, error) {
		return p.gh.BareDo(ctx, req)
	})
	if err != nil {
		return p.mapErr(ctx, err, subject)
	}
	defer resp.Body.Close()
	return p.untar(ctx, resp.Body, w, repo)
}

func (p *Provider) untar(ctx context.Context, body io.Reader, w io.Writer, repo string) error {
	broken := func(err error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		p.log.WarnContext(ctx, "github: archive download failed", "repo", repo, "err", err)
		return fmt.Errorf("GitHub's archive of %q could not be read; try again: %w", repo, errs.ErrUnavailable)
	}
	zr, err := gzip.NewReader(body)
	if err != nil {
		return broken(err)
	}
	defer zr.Close()
	tr := tar.NewReader(zr)
	tw := tar.NewWriter(w)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return broken(err)
		}
		if h.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		rel, ok := stripTop(h.Name)
		if !ok {
			continue
		}
		out := &tar.Header{Name: rel, Mode: h.Mode & 0o7777, ModTime: h.ModTime, Typeflag: h.Typeflag}
		switch h.Typeflag {
		case tar.TypeDir:
			out.Name += "/"
		case tar.TypeReg: // the reader reports legacy TypeRegA as TypeReg
			out.Size = h.Size
		case tar.TypeSymlink:
			out.Linkname = h.Linkname
		default:
			p.log.DebugContext(ctx, "github: archive entry skipped", "repo", repo, "name", rel, "type", h.Typeflag)
			continue
		}
		if err := tw.WriteHeader(out); err != nil {
			return fmt.Errorf("archive: %w", err)
		}
		if out.Typeflag == tar.TypeReg {
			if _, err := io.Copy(tw, readerOnly{tr}); err != nil {
				var rerr readErr
				if errors.As(err, &rerr) {
					return broken(rerr.err)
				}
				return fmt.Errorf("archive: %w", err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("archive: %w", err)
	}
	return nil
}

// stripTop removes the archive's top-level directory from name; false for the directory
// itself and for names that would leave the root.
func stripTop(name string) (string, bool) {
	_, rest, ok := strings.Cut(strings.TrimPrefix(name, "./"), "/")
	rest = strings.TrimSuffix(rest, "/")
	if !ok || rest == "" {
		return "", false
	}
	clean := path.Clean(rest)
	if clean != rest || strings.HasPrefix(clean, "/") || clean == ".." || strings.HasPrefix(clean, "../") {
		return "", false
	}
	return clean, true
}

// readerOnly tags read errors so a broken download is told apart from a failing writer.
type readerOnly struct{ r io.Reader }

type readErr struct{ err error }

func (e readErr) Error() string { return e.err.Error() }

func (r readerOnly) Read(b []byte) (int, error) {
	n, err := r.r.Read(b)
	if err != nil && err != io.EOF {
		err = readErr{err}
	}
	return n, err
}
