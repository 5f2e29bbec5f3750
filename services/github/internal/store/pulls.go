package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/db"
	"github.com/thefold/thefold/pkg/errs"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

var prStates = map[githubv1.PullRequestState]string{
	githubv1.PullRequestState_PULL_REQUEST_STATE_OPEN:   "open",
	githubv1.PullRequestState_PULL_REQUEST_STATE_CLOSED: "closed",
	githubv1.PullRequestState_PULL_REQUEST_STATE_MERGED: "merged",
}

func prState(s string) githubv1.PullRequestState {
	for k, v := range prStates {
		if v == s {
			return k
		}
	}
	return githubv1.PullRequestState_PULL_REQUEST_STATE_UNSPECIFIED
}

const prColumns = `repo, number, title, body, head, base, head_sha, base_sha, state, draft, author, labels,
	files_changed, additions, deletions, merge_commit_sha, create_time, update_time, merge_time, close_time`

func scanPR(row pgx.Row) (*githubv1.PullRequest, error) {
	p := &githubv1.PullRequest{Stats: &typev1.DiffStats{}}
	var (
		state                string
		created, updated     time.Time
		mergeTime, closeTime *time.Time
	)
	err := row.Scan(&p.Repo, &p.Number, &p.Title, &p.Body, &p.Head, &p.Base, &p.HeadSha, &p.BaseSha, &state,
		&p.Draft, &p.Author, &p.Labels, &p.Stats.FilesChanged, &p.Stats.Additions, &p.Stats.Deletions,
		&p.MergeCommitSha, &created, &updated, &mergeTime, &closeTime)
	if err != nil {
		return nil, err
	}
	p.State = prState(state)
	p.CreateTime, p.UpdateTime = timestamppb.New(created), timestamppb.New(updated)
	p.MergeTime, p.CloseTime = ts(mergeTime), ts(closeTime)
	return p, nil
}

// CreatePullRequest records a new open pull request under the repository's next number.
// An open pull request from the same head to the same base is returned instead (created
// false).
func (s *Store) CreatePullRequest(ctx context.Context, p *githubv1.PullRequest) (*githubv1.PullRequest, bool, error) {
	var (
		out     *githubv1.PullRequest
		created bool
	)
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		// Serialise creates per repository so the open-pull-request check and the insert agree.
		owner, name := split(p.GetRepo())
		if _, err := tx.Exec(ctx, "SELECT 1 FROM repos WHERE owner = $1 AND name = $2 FOR UPDATE", owner, name); err != nil {
			return fmt.Errorf("store: lock repo: %w", err)
		}
		existing, err := scanPR(tx.QueryRow(ctx, "SELECT "+prColumns+` FROM pull_requests
			WHERE repo = $1 AND head = $2 AND base = $3 AND state = 'open'`, p.GetRepo(), p.GetHead(), p.GetBase()))
		if err == nil {
			out = existing
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("store: find open pull request: %w", err)
		}
		n, err := nextNumber(ctx, tx, p.GetRepo())
		if err != nil {
			return err
		}
		st := p.GetStats()
		out, err = scanPR(tx.QueryRow(ctx, `INSERT INTO pull_requests (repo, number, title, body, head, base,
			head_sha, base_sha, state, draft, author, labels, files_changed, additions, deletions)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'open', $9, $10, $11, $12, $13, $14) RETURNING `+prColumns,
			p.GetRepo(), n, p.GetTitle(), p.GetBody(), p.GetHead(), p.GetBase(), p.GetHeadSha(), p.GetBaseSha(),
			p.GetDraft(), p.GetAuthor(), nonNil(p.GetLabels()), st.GetFilesChanged(), st.GetAdditions(), st.GetDeletions()))
		if err != nil {
			return fmt.Errorf("store: create pull request: %w", err)
		}
		created = true
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return out, created, nil
}

// GetPullRequest reads a pull request; unknown is errs.ErrNotFound.
func (s *Store) GetPullRequest(ctx context.Context, repo string, number int32) (*githubv1.PullRequest, error) {
	p, err := scanPR(s.pool.QueryRow(ctx, "SELECT "+prColumns+" FROM pull_requests WHERE repo = $1 AND number = $2", repo, number))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("pull request %s#%d: %w", repo, number, errs.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get pull request: %w", err)
	}
	return p, nil
}

// PullRequestFilter selects pull requests.
type PullRequestFilter struct {
	Repo       string
	State      githubv1.PullRequestState
	Head, Base string
	// Before pages: numbers below it (0: from the newest).
	Before int32
	Limit  int
}

// ListPullRequests lists pull requests, newest first.
func (s *Store) ListPullRequests(ctx context.Context, f PullRequestFilter) ([]*githubv1.PullRequest, error) {
	before := f.Before
	if before <= 0 {
		before = 1 << 30
	}
	rows, err := s.pool.Query(ctx, "SELECT "+prColumns+` FROM pull_requests
		WHERE repo = $1 AND ($2 = '' OR state = $2) AND ($3 = '' OR head = $3) AND ($4 = '' OR base = $4)
		  AND number < $5 ORDER BY number DESC LIMIT $6`,
		f.Repo, prStates[f.State], f.Head, f.Base, before, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("store: list pull requests: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*githubv1.PullRequest, error) { return scanPR(r) })
	if err != nil {
		return nil, fmt.Errorf("store: list pull requests: %w", err)
	}
	return out, nil
}

// PullRequestUpdate is what changes on a pull request: its commits and stats, and
// optionally its state (with the merge commit for MERGED).
type PullRequestUpdate struct {
	HeadSHA, BaseSHA string
	Stats            *typev1.DiffStats
	State            githubv1.PullRequestState // UNSPECIFIED: unchanged
	MergeCommitSHA   string
	// FromState, when set, is the state the row must be in (else errs.ErrConflict).
	FromState githubv1.PullRequestState
}

// UpdatePullRequest writes u and returns the pull request after it.
func (s *Store) UpdatePullRequest(ctx context.Context, repo string, number int32, u PullRequestUpdate) (*githubv1.PullRequest, error) {
	st := u.Stats
	p, err := scanPR(s.pool.QueryRow(ctx, `UPDATE pull_requests SET
			head_sha = $3, base_sha = $4, files_changed = $5, additions = $6, deletions = $7,
			state = CASE WHEN $8 = '' THEN state ELSE $8 END,
			merge_commit_sha = CASE WHEN $9 = '' THEN merge_commit_sha ELSE $9 END,
			merge_time = CASE WHEN $8 = 'merged' THEN now() ELSE merge_time END,
			close_time = CASE WHEN $8 IN ('merged', 'closed') THEN now() ELSE close_time END,
			update_time = now()
		WHERE repo = $1 AND number = $2 AND ($10 = '' OR state = $10) RETURNING `+prColumns,
		repo, number, u.HeadSHA, u.BaseSHA, st.GetFilesChanged(), st.GetAdditions(), st.GetDeletions(),
		prStates[u.State], u.MergeCommitSHA, prStates[u.FromState]))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("pull request %s#%d changed meanwhile: %w", repo, number, errs.ErrConflict)
	}
	if err != nil {
		return nil, fmt.Errorf("store: update pull request: %w", err)
	}
	return p, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
