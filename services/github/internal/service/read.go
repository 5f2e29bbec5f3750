package service

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/grpc"

	"github.com/thefold/thefold/pkg/errs"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	"github.com/thefold/thefold/pkg/tokens"
	"github.com/thefold/thefold/pkg/validate"

	"github.com/thefold/thefold/services/github/internal/forge"
	"github.com/thefold/thefold/services/github/internal/relevance"
)

// resolve checks the caller has need on repo and returns ctx with the forge credential,
// its provider and the commit ref names. An empty repository resolves to "" with empty = true.
func (s *Server) resolve(ctx context.Context, repo, ref string, need forge.Role) (context.Context, forge.Provider, string, bool, error) {
	if err := checkRef("ref", ref); err != nil {
		return ctx, nil, "", false, err
	}
	ctx, p, a, err := s.target(ctx, repo, need)
	if err != nil {
		return ctx, nil, "", false, err
	}
	sha, err := p.Resolve(ctx, repo, ref, a)
	if errors.Is(err, forge.ErrEmpty) {
		return ctx, p, "", true, nil
	}
	if err != nil {
		return ctx, nil, "", false, err
	}
	return ctx, p, sha, false, nil
}

// tree is a commit's whole tree, cached by commit.
func (s *Server) tree(ctx context.Context, p forge.Provider, repo, sha string) ([]*githubv1.TreeEntry, error) {
	return s.trees.get(ctx, repo+"@"+sha, func() ([]*githubv1.TreeEntry, error) { return p.Tree(ctx, repo, sha) })
}

// GetTree lists a ref's tree one page at a time; a page token pins the commit.
func (s *Server) GetTree(ctx context.Context, req *githubv1.GetTreeRequest) (*githubv1.GetTreeResponse, error) {
	size, err := validate.PageSize(req.GetPageSize(), 1000, 10000)
	if err != nil {
		return nil, err
	}
	prefix := strings.TrimSuffix(req.GetPathPrefix(), "/")
	if prefix != "" {
		if err := validate.Path("path_prefix", prefix); err != nil {
			return nil, err
		}
	}
	ref, offset := req.GetRef(), 0
	if t := req.GetPageToken(); t != "" {
		parts, err := validate.DecodePageToken(t, "t1", 3, "GetTree")
		if err != nil {
			return nil, err
		}
		n, err := strconv.Atoi(parts[1])
		if err != nil || n < 0 || !hexSHA.MatchString(parts[0]) || parts[2] != prefixKey(req.GetRepo(), prefix) {
			return nil, validate.BadPageToken("GetTree")
		}
		ref, offset = parts[0], n
	}
	ctx, p, sha, empty, err := s.resolve(ctx, req.GetRepo(), ref, forge.RoleRead)
	if err != nil {
		return nil, err
	}
	if empty {
		return &githubv1.GetTreeResponse{Empty: true}, nil
	}
	all, err := s.tree(ctx, p, req.GetRepo(), sha)
	if err != nil {
		return nil, err
	}
	entries := all
	if prefix != "" {
		entries = entries[:0:0]
		for _, e := range all {
			if strings.HasPrefix(e.GetPath(), prefix+"/") {
				entries = append(entries, e)
			}
		}
	}
	resp := &githubv1.GetTreeResponse{CommitSha: sha}
	if offset > len(entries) {
		return nil, validate.BadPageToken("GetTree")
	}
	end := min(offset+size, len(entries))
	resp.Entries = entries[offset:end]
	if end < len(entries) {
		resp.NextPageToken = validate.EncodePageToken("t1", sha, strconv.Itoa(end), prefixKey(req.GetRepo(), prefix))
	}
	return resp, nil
}

// prefixKey binds a page token to the repository and prefix it was issued for.
func prefixKey(repo, prefix string) string {
	h := fnv.New64a()
	h.Write([]byte(repo + "\x00" + prefix))
	return strconv.FormatUint(h.Sum64(), 36)
}

// GetFiles reads files at a ref.
func (s *Server) GetFiles(ctx context.Context, req *githubv1.GetFilesRequest) (*githubv1.GetFilesResponse, error) {
	if n := len(req.GetPaths()); n == 0 || n > 100 {
		return nil, errs.Invalid("paths", "want 1 to 100 paths, got %d", n)
	}
	for i, p := range req.GetPaths() {
		if err := validate.Path(fmt.Sprintf("paths[%d]", i), p); err != nil {
			return nil, err
		}
	}
	ctx, p, sha, empty, err := s.resolve(ctx, req.GetRepo(), req.GetRef(), forge.RoleRead)
	if err != nil {
		return nil, err
	}
	if empty {
		return &githubv1.GetFilesResponse{MissingPaths: req.GetPaths()}, nil
	}
	files, missing, err := p.Files(ctx, req.GetRepo(), sha, req.GetPaths())
	if err != nil {
		return nil, err
	}
	return &githubv1.GetFilesResponse{CommitSha: sha, Files: files, MissingPaths: missing}, nil
}

// archiveChunk is the most data one GetArchive message carries.
const archiveChunk = 1 << 20

// GetArchive streams a tar of a ref.
func (s *Server) GetArchive(req *githubv1.GetArchiveRequest, stream grpc.ServerStreamingServer[githubv1.GetArchiveResponse]) error {
	ctx := stream.Context()
	ctx, p, sha, empty, err := s.resolve(ctx, req.GetRepo(), req.GetRef(), forge.RoleRead)
	if err != nil {
		return err
	}
	if empty {
		return errs.Precondition("repository %q is empty: there is nothing to archive (InitRepo makes a first commit)", req.GetRepo())
	}
	if err := stream.Send(&githubv1.GetArchiveResponse{Payload: &githubv1.GetArchiveResponse_Metadata{Metadata: &githubv1.ArchiveMetadata{CommitSha: sha}}}); err != nil {
		return err
	}
	w := &chunkWriter{send: func(b []byte) error {
		return stream.Send(&githubv1.GetArchiveResponse{Payload: &githubv1.GetArchiveResponse_Chunk{Chunk: b}})
	}}
	if err := p.Archive(ctx, req.GetRepo(), sha, w); err != nil {
		return err
	}
	return w.flush()
}

// chunkWriter gathers writes into messages of up to archiveChunk bytes.
type chunkWriter struct {
	buf  []byte
	send func([]byte) error
}

func (w *chunkWriter) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 {
		take := min(archiveChunk-len(w.buf), len(b))
		w.buf = append(w.buf, b[:take]...)
		b = b[take:]
		if len(w.buf) == archiveChunk {
			if err := w.flush(); err != nil {
				return 0, err
			}
		}
	}
	return n, nil
}

func (w *chunkWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	err := w.send(w.buf)
	w.buf = nil
	return err
}

const (
	defaultBudget   = 30000
	maxBudget       = 1000000
	defaultMaxFiles = 20
	maxMaxFiles     = 100
	maxTask         = 100000
)

// FindRelevantFiles ranks a ref's files against a task and returns the best within the
// token budget (package relevance).
func (s *Server) FindRelevantFiles(ctx context.Context, req *githubv1.FindRelevantFilesRequest) (*githubv1.FindRelevantFilesResponse, error) {
	if _, err := validate.RequiredText("task", req.GetTask(), maxTask); err != nil {
		return nil, err
	}
	budget, maxN := int(req.GetTokenBudget()), int(req.GetMaxFiles())
	switch {
	case budget < 0 || budget > maxBudget:
		return nil, errs.Invalid("token_budget", "want 1 to %d, or 0 for %d", maxBudget, defaultBudget)
	case budget == 0:
		budget = defaultBudget
	}
	switch {
	case maxN < 0 || maxN > maxMaxFiles:
		return nil, errs.Invalid("max_files", "want 1 to %d, or 0 for %d", maxMaxFiles, defaultMaxFiles)
	case maxN == 0:
		maxN = defaultMaxFiles
	}
	if len(req.GetIncludePaths()) > maxMaxFiles {
		return nil, errs.Invalid("include_paths", "at most %d paths", maxMaxFiles)
	}
	for i, p := range req.GetIncludePaths() {
		if err := validate.Path(fmt.Sprintf("include_paths[%d]", i), p); err != nil {
			return nil, err
		}
	}
	ctx, p, sha, empty, err := s.resolve(ctx, req.GetRepo(), req.GetRef(), forge.RoleRead)
	if err != nil {
		return nil, err
	}
	resp := &githubv1.FindRelevantFilesResponse{CommitSha: sha, Tokenizer: tokens.Name()}
	if empty {
		return resp, nil
	}
	ix, err := s.indexes.get(ctx, req.GetRepo()+"@"+sha, func() (*relevance.Index, error) { return s.index(ctx, p, req.GetRepo(), sha) })
	if err != nil {
		return nil, err
	}
	results, used := ix.Rank(relevance.Query{Task: req.GetTask(), TokenBudget: budget, MaxFiles: maxN, IncludePaths: req.GetIncludePaths()})
	resp.TokensUsed, resp.FilesConsidered = int32(used), int32(ix.Len())
	for _, r := range results {
		f := &githubv1.RelevantFile{Path: r.Path, Score: r.Score, Reason: r.Reason, Content: r.Content,
			Tokens: int32(r.Tokens), ContentTokens: int32(r.ContentTokens)}
		switch r.Inclusion {
		case relevance.InclusionWhole:
			f.Inclusion, f.ContentIncluded = githubv1.RelevantFileInclusion_RELEVANT_FILE_INCLUSION_WHOLE, true
		case relevance.InclusionOutline:
			f.Inclusion, f.ContentIncluded = githubv1.RelevantFileInclusion_RELEVANT_FILE_INCLUSION_OUTLINE, true
		default:
			f.Inclusion = githubv1.RelevantFileInclusion_RELEVANT_FILE_INCLUSION_NONE
		}
		resp.Files = append(resp.Files, f)
	}
	return resp, nil
}

// index reads a commit's text files through the provider's archive and indexes them.
func (s *Server) index(ctx context.Context, p forge.Provider, repo, sha string) (*relevance.Index, error) {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(p.Archive(ctx, repo, sha, pw)) }()
	defer pr.Close()
	var files []relevance.File
	tr := tar.NewReader(pr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("github service: index %s@%s: %w", repo, sha, err)
		}
		if h.Typeflag != tar.TypeReg || h.Size > s.cfg.MaxIndexFileBytes || h.Size == 0 {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, fmt.Errorf("github service: index %s@%s: %w", repo, sha, err)
		}
		if !utf8.Valid(data) || strings.IndexByte(string(data), 0) >= 0 {
			continue
		}
		files = append(files, relevance.File{Path: h.Name, Content: string(data)})
	}
	return relevance.Build(files), nil
}
