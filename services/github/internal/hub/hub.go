// Package hub is the GitHub provider of the github service: forge.Provider over GitHub's
// REST API (github.com or GitHub Enterprise) through go-github.
//
// Commits are made with the git data API (blobs, a tree on the parent's tree, a commit, a
// non-forced ref update), so a commit of many files is one atomic commit and a branch that
// moved meanwhile is ABORTED, never overwritten. GitHub's answers are mapped to the error
// contract of package forge in one place (mapErr); GitHub's own text is logged, never
// returned. Read calls wait out a rate limit once when the wait is short (Config.MaxRetryWait).
package hub

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/go-github/v84/github"

	"github.com/thefold/thefold/pkg/errs"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	"github.com/thefold/thefold/services/github/internal/forge"
)

// Config configures the provider.
type Config struct {
	// Token authenticates the calls whose context carries no credential
	// (forge.WithCredential). The github service leaves it empty: every call it makes
	// carries the caller's own token or, through an allow-list grant, the server's, and a
	// call with neither is refused before any request leaves.
	Token string
	// BaseURL is the REST API root; "" means https://api.github.com/. Set it for GitHub
	// Enterprise ("https://ghe.example.com/", "/api/v3/" is added) and in tests.
	BaseURL string
	// UploadURL is the uploads root of GitHub Enterprise; "" means BaseURL.
	UploadURL string
	// HTTPClient carries the calls; nil means a client without an overall timeout (archives
	// stream for long) whose transport waits at most a minute for response headers.
	HTTPClient *http.Client
	// Logger receives GitHub's own error texts and rate-limit waits; nil discards.
	Logger *slog.Logger
	// MaxRetryWait is the longest a read waits for a rate limit to reset before retrying
	// once; a longer wait fails at once with errs.ErrUnavailable. Default 60s.
	MaxRetryWait time.Duration
}

// DefaultAuthor is the commit author when a request names none.
var DefaultAuthor = forge.Signature{Name: "TheFold", Email: "thefold@users.noreply.github.com"}

// Provider is the GitHub forge.
type Provider struct {
	gh           *github.Client
	log          *slog.Logger
	maxRetryWait time.Duration

	token string // Config.Token

	loginMu sync.Mutex
	logins  map[[32]byte]string // the login of each token's user, once known, by SHA-256 of the token

	// updatePoll and updateWait pace and bound the reads that wait for an accepted branch
	// update to move a pull request's head (defaultUpdatePoll, defaultUpdateWait).
	updatePoll, updateWait time.Duration

	// depsOff is set once GitHub answered 404/410 on the issue dependencies API: it is not
	// available on this server, and every issue read would pay one more call to learn it again.
	depsOff atomic.Bool
}

var _ forge.Provider = (*Provider)(nil)

// New returns a provider for cfg.
func New(cfg Config) (*Provider, error) {
	hc := cfg.HTTPClient
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.ResponseHeaderTimeout = time.Minute
		hc = &http.Client{Transport: tr}
	}
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	withAuth := *hc
	withAuth.Transport = &credentialTransport{base: base, fallback: cfg.Token}
	gh := github.NewClient(&withAuth)
	if cfg.BaseURL != "" {
		up := cfg.UploadURL
		if up == "" {
			up = cfg.BaseURL
		}
		var err error
		if gh, err = gh.WithEnterpriseURLs(cfg.BaseURL, up); err != nil {
			return nil, fmt.Errorf("hub: BaseURL: %w", err)
		}
	}
	// Errors of the tarball redirect come back typed (*github.ErrorResponse, rate limits)
	// instead of as a bare "unexpected status code".
	gh.RateLimitRedirectionalEndpoints = true
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	wait := cfg.MaxRetryWait
	if wait <= 0 {
		wait = 60 * time.Second
	}
	return &Provider{gh: gh, log: log, maxRetryWait: wait, token: cfg.Token, logins: map[[32]byte]string{},
		updatePoll: defaultUpdatePoll, updateWait: defaultUpdateWait}, nil
}

// errNoCredential refuses a call that names no GitHub credential.
var errNoCredential = errors.New("hub: no GitHub credential for this call")

// credentialTransport authenticates each request with the credential of its context
// (forge.WithCredential), or the fallback; without either the request is not sent.
type credentialTransport struct {
	base     http.RoundTripper
	fallback string
}

func (t *credentialTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	tok := forge.Credential(r.Context())
	if tok == "" {
		tok = t.fallback
	}
	if tok == "" {
		if r.Body != nil {
			_ = r.Body.Close()
		}
		return nil, errNoCredential
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+tok)
	return t.base.RoundTrip(r)
}

// Kind is GITHUB.
func (p *Provider) Kind() githubv1.RepoProvider { return githubv1.RepoProvider_REPO_PROVIDER_GITHUB }

// splitRepo splits "owner/name".
func splitRepo(repo string) (owner, name string, err error) {
	owner, name, ok := strings.Cut(repo, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("repository %q: want \"owner/name\": %w", repo, errs.ErrInvalid)
	}
	return owner, name, nil
}

// authLogin returns the login of the user of the call's token (cached once known).
func (p *Provider) authLogin(ctx context.Context) (string, error) {
	tok := forge.Credential(ctx)
	if tok == "" {
		tok = p.token
	}
	key := sha256.Sum256([]byte(tok))
	p.loginMu.Lock()
	defer p.loginMu.Unlock()
	if l, ok := p.logins[key]; ok {
		return l, nil
	}
	u, _, err := read(ctx, p, func(ctx context.Context) (*github.User, *github.Response, error) {
		return p.gh.Users.Get(ctx, "")
	})
	if err != nil {
		return "", p.mapErr(ctx, err, "the authenticated user")
	}
	if len(p.logins) >= 1024 {
		clear(p.logins)
	}
	p.logins[key] = u.GetLogin()
	return u.GetLogin(), nil
}

// maxPerPage is GitHub's largest page.
const maxPerPage = 100

// pageOpts turns a forge.Page into GitHub's page number and size. The cursor carries both
// ("<page>.<per_page>"), so a caller changing its page size midway still gets the next
// items rather than a skip or an overlap.
func pageOpts(pg forge.Page) (github.ListOptions, error) {
	per := pg.Size
	if per <= 0 {
		per = 50
	}
	per = min(per, maxPerPage)
	if pg.Cursor == "" {
		return github.ListOptions{Page: 1, PerPage: per}, nil
	}
	a, b, ok := strings.Cut(pg.Cursor, ".")
	page, err1 := strconv.Atoi(a)
	size, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || page < 1 || size < 1 || size > maxPerPage {
		return github.ListOptions{}, fmt.Errorf("page token: %w", errs.ErrInvalid)
	}
	return github.ListOptions{Page: page, PerPage: size}, nil
}

// nextCursor is the cursor of the page after resp's, "" on the last.
func nextCursor(resp *github.Response, per int) string {
	if resp == nil || resp.NextPage == 0 {
		return ""
	}
	return strconv.Itoa(resp.NextPage) + "." + strconv.Itoa(per)
}

// maxSkippedPages bounds how many GitHub pages a filtered list (issues without pull
// requests, merged or closed pull requests) reads to return a non-empty page.
const maxSkippedPages = 5
