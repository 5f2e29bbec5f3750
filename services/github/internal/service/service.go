// Package service implements RepoService over the forge providers: it validates every
// request, routes a repository to its provider by owner (configuration), keeps the answers of
// request_id calls, caches trees and relevance indexes by commit, and ranks files for the
// agent (package relevance).
package service

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/errs"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	"github.com/thefold/thefold/pkg/seal"
	"github.com/thefold/thefold/pkg/validate"

	"github.com/thefold/thefold/services/github/internal/forge"
	"github.com/thefold/thefold/services/github/internal/relevance"
	"github.com/thefold/thefold/services/github/internal/store"
)

// Server implements githubv1.RepoServiceServer.
type Server struct {
	githubv1.UnimplementedRepoServiceServer

	cfg       Config
	store     *store.Store
	log       *slog.Logger
	providers map[githubv1.RepoProvider]forge.Provider
	def       githubv1.RepoProvider

	box *seal.Box // encrypts people's GitHub tokens; nil: they cannot store any

	trees   *cache[[]*githubv1.TreeEntry]
	indexes *cache[*relevance.Index]
}

var _ githubv1.RepoServiceServer = (*Server)(nil)

// Option configures a Server.
type Option func(*Server)

// WithProvider offers a provider under its kind.
func WithProvider(p forge.Provider) Option {
	return func(s *Server) { s.providers[p.Kind()] = p }
}

// WithSecrets sets the box that encrypts people's GitHub tokens at rest.
func WithSecrets(b *seal.Box) Option { return func(s *Server) { s.box = b } }

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.log = l } }

// New returns a server; the local provider is required, github is optional.
func New(cfg Config, st *store.Store, opts ...Option) (*Server, error) {
	s := &Server{cfg: cfg, store: st, log: slog.New(slog.DiscardHandler), providers: map[githubv1.RepoProvider]forge.Provider{},
		def: githubv1.RepoProvider_REPO_PROVIDER_LOCAL}
	for _, o := range opts {
		o(s)
	}
	if cfg.Forge == "github" {
		s.def = githubv1.RepoProvider_REPO_PROVIDER_GITHUB
	}
	if _, ok := s.providers[s.def]; !ok {
		return nil, fmt.Errorf("github service: the default forge %s is not configured", cfg.Forge)
	}
	s.trees = newCache[[]*githubv1.TreeEntry](max(cfg.TreeCache, 1))
	s.indexes = newCache[*relevance.Index](max(cfg.IndexCache, 1))
	return s, nil
}

// actor is the authenticated caller.
func actor(ctx context.Context) (forge.Actor, error) {
	p, err := auth.MustFromContext(ctx)
	if err != nil {
		return forge.Actor{}, err
	}
	return forge.Actor{UserID: p.UserID, Admin: p.HasRole("admin")}, nil
}

// kindOf is the provider that serves an owner, by configuration.
func (s *Server) kindOf(owner string) githubv1.RepoProvider {
	switch {
	case owner == "local" || slices.Contains(s.cfg.LocalOwners, owner):
		return githubv1.RepoProvider_REPO_PROVIDER_LOCAL
	case slices.Contains(s.cfg.GitHubOwners, owner):
		return githubv1.RepoProvider_REPO_PROVIDER_GITHUB
	}
	return s.def
}

// route validates a repository name and returns its provider.
func (s *Server) route(field, repo string) (forge.Provider, error) {
	if err := validate.Repo(field, repo, true); err != nil {
		return nil, err
	}
	owner, _, _ := strings.Cut(repo, "/")
	return s.providerFor(s.kindOf(owner))
}

func (s *Server) providerFor(k githubv1.RepoProvider) (forge.Provider, error) {
	p, ok := s.providers[k]
	if !ok {
		return nil, errs.Public(codes.FailedPrecondition, "the %s provider is not configured (set THEFOLD_GITHUB_TOKEN)", providerName(k))
	}
	return p, nil
}

func providerName(k githubv1.RepoProvider) string {
	if k == githubv1.RepoProvider_REPO_PROVIDER_GITHUB {
		return "github"
	}
	return "local"
}

// once runs do at most once per (caller, method, request_id); a retry gets the first
// answer back in out. Without a request_id it just runs do.
func (s *Server) once(ctx context.Context, method, requestID string, req proto.Message, out proto.Message, do func() (proto.Message, error)) (replayed bool, err error) {
	if requestID == "" {
		m, err := do()
		if err != nil {
			return false, err
		}
		proto.Merge(out, m)
		return false, nil
	}
	a, err := actor(ctx)
	if err != nil {
		return false, err
	}
	answer, replayed, err := s.store.Once(ctx, store.Request{Caller: a.UserID, Method: method, ID: requestID, Fingerprint: fingerprint(req)},
		func() ([]byte, error) {
			m, err := do()
			if err != nil {
				return nil, err
			}
			return proto.MarshalOptions{Deterministic: true}.Marshal(m)
		})
	if err != nil {
		return false, err
	}
	if err := proto.Unmarshal(answer, out); err != nil {
		return false, fmt.Errorf("github service: recorded answer of %s: %w", method, err)
	}
	return replayed, nil
}

// fingerprint hashes a request without its request_id field.
func fingerprint(req proto.Message) []byte {
	c := proto.Clone(req)
	if f := c.ProtoReflect().Descriptor().Fields().ByName("request_id"); f != nil {
		c.ProtoReflect().Clear(f)
	}
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(c)
	sum := sha256.Sum256(b)
	return sum[:]
}

// Git's rules for a branch name (git check-ref-format), which GitHub applies too.
var badRef = regexp.MustCompile(`\.\.|@\{|//|[\x00-\x20\x7f~^:?*\[\\]`)

// checkBranch checks a branch name.
func checkBranch(field, b string, required bool) error {
	switch {
	case b == "" && required:
		return errs.Invalid(field, "required")
	case b == "":
		return nil
	case len(b) > 255:
		return errs.Invalid(field, "at most 255 characters")
	case badRef.MatchString(b), strings.HasPrefix(b, "-"), strings.HasPrefix(b, "/"), strings.HasSuffix(b, "/"),
		strings.HasSuffix(b, "."), strings.HasSuffix(b, ".lock"), strings.Contains(b, "/."), strings.HasPrefix(b, "."), b == "@":
		return errs.Invalid(field, "%q is not a valid branch name (git check-ref-format: no spaces, '..', '~^:?*[\\', '@{', leading '-' or '.', trailing '/', '.' or '.lock')", validate.Truncate(b, 64))
	}
	return nil
}

// checkRef checks a ref (branch, tag or sha): a branch name's rules, "refs/…" allowed.
func checkRef(field, r string) error { return checkBranch(field, r, false) }

var hexSHA = regexp.MustCompile(`^[0-9a-f]{40}$`)

// checkSHA checks an optional full commit sha.
func checkSHA(field, sha string) error {
	if sha != "" && !hexSHA.MatchString(sha) {
		return errs.Invalid(field, "want a full 40-hex-digit commit sha, got %q", validate.Truncate(sha, 64))
	}
	return nil
}

// checkNumber checks an issue or pull request number.
func checkNumber(n int32) error {
	if n <= 0 {
		return errs.Invalid("number", "required, a positive issue or pull request number")
	}
	return nil
}
