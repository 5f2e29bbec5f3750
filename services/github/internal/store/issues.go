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
)

const issueColumns = `i.repo, i.number, i.title, i.body, i.labels, i.state, i.blocked_by, i.author, i.assignees,
	(SELECT count(*) FROM comments c WHERE c.repo = i.repo AND c.number = i.number),
	i.create_time, i.update_time, i.close_time`

func scanIssue(row pgx.Row) (*githubv1.Issue, error) {
	i := &githubv1.Issue{}
	var (
		state            string
		created, updated time.Time
		closed           *time.Time
	)
	err := row.Scan(&i.Repo, &i.Number, &i.Title, &i.Body, &i.Labels, &state, &i.BlockedBy, &i.Author,
		&i.Assignees, &i.CommentCount, &created, &updated, &closed)
	if err != nil {
		return nil, err
	}
	i.State = githubv1.IssueState_ISSUE_STATE_OPEN
	if state == "closed" {
		i.State = githubv1.IssueState_ISSUE_STATE_CLOSED
	}
	i.CreateTime, i.UpdateTime, i.CloseTime = timestamppb.New(created), timestamppb.New(updated), ts(closed)
	return i, nil
}

// CreateIssue records a new open issue under the repository's next number.
func (s *Store) CreateIssue(ctx context.Context, i *githubv1.Issue) (*githubv1.Issue, error) {
	var out *githubv1.Issue
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		n, err := nextNumber(ctx, tx, i.GetRepo())
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO issues (repo, number, title, body, labels, state, blocked_by, author)
			VALUES ($1, $2, $3, $4, $5, 'open', $6, $7)`,
			i.GetRepo(), n, i.GetTitle(), i.GetBody(), nonNil(i.GetLabels()), nonNilInts(i.GetBlockedBy()), i.GetAuthor()); err != nil {
			return fmt.Errorf("store: create issue: %w", err)
		}
		out, err = getIssue(ctx, tx, i.GetRepo(), n)
		return err
	})
	return out, err
}

// GetIssue reads an issue; unknown (or a pull request's number) is errs.ErrNotFound.
func (s *Store) GetIssue(ctx context.Context, repo string, number int32) (*githubv1.Issue, error) {
	return getIssue(ctx, s.pool, repo, number)
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func getIssue(ctx context.Context, q querier, repo string, number int32) (*githubv1.Issue, error) {
	i, err := scanIssue(q.QueryRow(ctx, "SELECT "+issueColumns+" FROM issues i WHERE i.repo = $1 AND i.number = $2", repo, number))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("issue %s#%d: %w", repo, number, errs.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get issue: %w", err)
	}
	return i, nil
}

// IssueFilter selects issues.
type IssueFilter struct {
	Repo   string
	State  githubv1.IssueState
	Labels []string
	Before int32
	Limit  int
}

// ListIssues lists issues, newest first.
func (s *Store) ListIssues(ctx context.Context, f IssueFilter) ([]*githubv1.Issue, error) {
	before := f.Before
	if before <= 0 {
		before = 1 << 30
	}
	state := map[githubv1.IssueState]string{githubv1.IssueState_ISSUE_STATE_OPEN: "open", githubv1.IssueState_ISSUE_STATE_CLOSED: "closed"}[f.State]
	rows, err := s.pool.Query(ctx, "SELECT "+issueColumns+` FROM issues i
		WHERE i.repo = $1 AND ($2 = '' OR i.state = $2) AND i.labels @> $3 AND i.number < $4
		ORDER BY i.number DESC LIMIT $5`, f.Repo, state, nonNil(f.Labels), before, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("store: list issues: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*githubv1.Issue, error) { return scanIssue(r) })
	if err != nil {
		return nil, fmt.Errorf("store: list issues: %w", err)
	}
	return out, nil
}

// IssueUpdate holds the new values of the fields that are set.
type IssueUpdate struct {
	State     *githubv1.IssueState
	Labels    *[]string
	Title     *string
	Body      *string
	BlockedBy *[]int32
}

// UpdateIssue writes u and returns the issue after it.
func (s *Store) UpdateIssue(ctx context.Context, repo string, number int32, u IssueUpdate) (*githubv1.Issue, error) {
	var out *githubv1.Issue
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		cur, err := getIssue(ctx, tx, repo, number)
		if err != nil {
			return err
		}
		state, labels, title, body, blocked := cur.GetState(), cur.GetLabels(), cur.GetTitle(), cur.GetBody(), cur.GetBlockedBy()
		if u.State != nil {
			state = *u.State
		}
		if u.Labels != nil {
			labels = *u.Labels
		}
		if u.Title != nil {
			title = *u.Title
		}
		if u.Body != nil {
			body = *u.Body
		}
		if u.BlockedBy != nil {
			blocked = *u.BlockedBy
		}
		st := "open"
		if state == githubv1.IssueState_ISSUE_STATE_CLOSED {
			st = "closed"
		}
		if _, err := tx.Exec(ctx, `UPDATE issues SET state = $3, labels = $4, title = $5, body = $6, blocked_by = $7,
				close_time = CASE WHEN $3 = 'closed' THEN coalesce(close_time, now()) ELSE NULL END, update_time = now()
			WHERE repo = $1 AND number = $2`, repo, number, st, nonNil(labels), title, body, nonNilInts(blocked)); err != nil {
			return fmt.Errorf("store: update issue: %w", err)
		}
		out, err = getIssue(ctx, tx, repo, number)
		return err
	})
	return out, err
}

// AddComment records a comment on an issue or pull request of the repository; an unknown
// number is errs.ErrNotFound.
func (s *Store) AddComment(ctx context.Context, repo string, number int32, body, author string) (*githubv1.IssueComment, error) {
	var (
		id      int64
		created time.Time
	)
	err := s.pool.QueryRow(ctx, `INSERT INTO comments (repo, number, body, author)
		SELECT $1, $2, $3, $4 WHERE EXISTS (SELECT 1 FROM issues WHERE repo = $1 AND number = $2)
		                         OR EXISTS (SELECT 1 FROM pull_requests WHERE repo = $1 AND number = $2)
		RETURNING id, create_time`, repo, number, body, author).Scan(&id, &created)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("issue or pull request %s#%d: %w", repo, number, errs.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: add comment: %w", err)
	}
	return &githubv1.IssueComment{Id: fmt.Sprint(id), Body: body, Author: author, CreateTime: timestamppb.New(created)}, nil
}

func nonNilInts(s []int32) []int32 {
	if s == nil {
		return []int32{}
	}
	return s
}
