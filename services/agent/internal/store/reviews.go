package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/db"
	"github.com/thefold/thefold/pkg/errs"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	"github.com/thefold/thefold/pkg/protoenum"
	"github.com/thefold/thefold/pkg/validate"
)

// ReviewStatusName is the stored name of a review status, e.g. "pending".
func ReviewStatusName(s agentv1.ReviewStatus) string { return protoenum.Name(s, "REVIEW_STATUS_") }

// insertReview inserts r for rec's job under key (once: a second insert with the key is
// a no-op that loads the first review's id) and sets the job's review_id.
func (s *Store) insertReview(ctx context.Context, tx pgx.Tx, rec *Record, r *agentv1.Review, key string) error {
	j := rec.Job
	r.OwnerId, r.JobId, r.TaskId, r.ProjectId, r.Repo = j.OwnerId, j.Id, j.TaskId, j.ProjectId, j.Repo
	id, err := insertReviewRow(ctx, tx, r, key)
	if err != nil {
		return err
	}
	j.ReviewId = id
	return nil
}

// insertReviewRow inserts r (owner, job or project, task and repo set) under key, once: a
// second insert with the key loads the first review's id, which it returns and sets on r.
func insertReviewRow(ctx context.Context, tx pgx.Tx, r *agentv1.Review, key string) (string, error) {
	now := timestamppb.Now()
	if r.Status == agentv1.ReviewStatus_REVIEW_STATUS_UNSPECIFIED {
		r.Status = agentv1.ReviewStatus_REVIEW_STATUS_PENDING
	}
	if r.Id == "" {
		r.Id = uuid.NewString()
	}
	r.CreateTime, r.UpdateTime = now, now
	doc, err := jsonOut.Marshal(r)
	if err != nil {
		return "", err
	}
	var job, project *string
	if r.ProjectId != "" && r.JobId == "" {
		project = &r.ProjectId
	} else {
		job = &r.JobId
	}
	var id string
	err = tx.QueryRow(ctx, `INSERT INTO reviews (id, owner_id, job_id, project_id, task_id, repo, status, submit_key, review)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (submit_key) DO NOTHING RETURNING id`,
		r.Id, r.OwnerId, job, project, r.TaskId, r.Repo, ReviewStatusName(r.Status), key, doc).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		err = tx.QueryRow(ctx, `SELECT id FROM reviews WHERE submit_key = $1`, key).Scan(&id)
	}
	if err != nil {
		return "", err
	}
	r.Id = id
	return id, nil
}

// UpdateReview writes r (its status, feedback, pull request, decide time) in tx.
func UpdateReview(ctx context.Context, tx pgx.Tx, r *agentv1.Review) error {
	r.UpdateTime = timestamppb.Now()
	doc, err := jsonOut.Marshal(r)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `UPDATE reviews SET status = $2, review = $3, update_time = now() WHERE id = $1`, r.Id, ReviewStatusName(r.Status), doc)
	return err
}

// GetReview returns owner's review id with its files; another owner's is errs.ErrNotFound.
func (s *Store) GetReview(ctx context.Context, owner, id string) (*agentv1.Review, error) {
	var doc []byte
	err := s.pool.QueryRow(ctx, `SELECT review FROM reviews WHERE id = $1 AND owner_id = $2`, id, owner).Scan(&doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("review %s: %w", id, errs.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	r := &agentv1.Review{}
	return r, jsonIn.Unmarshal(doc, r)
}

// ReviewOf returns the job id of owner's review id, or its project id for a project's
// review (NotFound otherwise), for a decision that goes through Mutate or ChangeProject.
func (s *Store) ReviewOf(ctx context.Context, owner, id string) (job, project string, err error) {
	var j, p *string
	err = s.pool.QueryRow(ctx, `SELECT job_id::text, project_id::text FROM reviews WHERE id = $1 AND owner_id = $2`, id, owner).Scan(&j, &p)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", fmt.Errorf("review %s: %w", id, errs.ErrNotFound)
	}
	if j != nil {
		job = *j
	}
	if p != nil {
		project = *p
	}
	return job, project, err
}

// InsertProjectReview inserts r, the review of project p, under key (once: a second insert
// with the key is a no-op that loads the first review's id), in tx, and sets p's review_id.
func InsertProjectReview(ctx context.Context, tx pgx.Tx, p *agentv1.Project, r *agentv1.Review, key string) error {
	r.OwnerId, r.ProjectId, r.Repo = p.OwnerId, p.Id, p.Repo
	id, err := insertReviewRow(ctx, tx, r, key)
	if err != nil {
		return err
	}
	p.ReviewId = id
	return nil
}

// LoadReview reads review id in tx, locked, for a decision on it.
func LoadReview(ctx context.Context, tx pgx.Tx, id string) (*agentv1.Review, error) {
	var doc []byte
	if err := tx.QueryRow(ctx, `SELECT review FROM reviews WHERE id = $1 FOR UPDATE`, id).Scan(&doc); err != nil {
		return nil, err
	}
	r := &agentv1.Review{}
	return r, jsonIn.Unmarshal(doc, r)
}

// ReviewFilter narrows ListReviews; empty fields match anything.
type ReviewFilter struct {
	JobID, TaskID, ProjectID, Repo string
	Statuses                       []agentv1.ReviewStatus
}

const reviewTokenVersion = "r1"

// ListReviews returns a page of owner's reviews, newest first, files without content or
// unified diff.
func (s *Store) ListReviews(ctx context.Context, owner string, f ReviewFilter, pageSize int, pageToken string) ([]*agentv1.Review, string, error) {
	var c db.Conds
	c.Add("owner_id = $%d", owner)
	if f.JobID != "" {
		c.Add("job_id = $%d::uuid", f.JobID)
	}
	if f.TaskID != "" {
		c.Add("task_id = $%d", f.TaskID)
	}
	if f.ProjectID != "" {
		c.Add("project_id = $%d::uuid", f.ProjectID)
	}
	if f.Repo != "" {
		c.Add("repo = $%d", f.Repo)
	}
	if len(f.Statuses) > 0 {
		names := make([]string, len(f.Statuses))
		for i, st := range f.Statuses {
			names[i] = ReviewStatusName(st)
		}
		c.Add("status = ANY($%d)", names)
	}
	if err := pageAfter(pageToken, reviewTokenVersion, "ListReviews", &c); err != nil {
		return nil, "", err
	}
	rows, err := s.pool.Query(ctx, `SELECT review, create_time, id FROM reviews`+c.Where()+
		` ORDER BY create_time DESC, id DESC LIMIT `+c.Arg(pageSize+1), c.Args...)
	if err != nil {
		return nil, "", err
	}
	defer rows.Close()
	var (
		out   []*agentv1.Review
		times []time.Time
	)
	for rows.Next() {
		var (
			doc []byte
			at  time.Time
			id  string
		)
		if err := rows.Scan(&doc, &at, &id); err != nil {
			return nil, "", err
		}
		r := &agentv1.Review{}
		if err := jsonIn.Unmarshal(doc, r); err != nil {
			return nil, "", fmt.Errorf("store: review %s: %w", id, err)
		}
		for _, f := range r.Files {
			f.Content = ""
			if f.Diff != nil {
				f.Diff = proto.CloneOf(f.Diff)
				f.Diff.UnifiedDiff = ""
			}
		}
		out, times = append(out, r), append(times, at)
	}
	if err := rows.Err(); err != nil {
		return nil, "", err
	}
	next := ""
	if len(out) > pageSize {
		out = out[:pageSize]
		next = validate.EncodeTimeIDToken(reviewTokenVersion, times[pageSize-1], out[pageSize-1].Id)
	}
	return out, next, nil
}

// pageAfter adds the keyset condition of pageToken (create_time and id of the last row of
// the previous page) to where.
func pageAfter(pageToken, version, method string, c *db.Conds) error {
	if pageToken == "" {
		return nil
	}
	at, id, err := validate.DecodeTimeIDToken(pageToken, version, method)
	if err != nil {
		return err
	}
	c.Add("(create_time, id) < ($%d, $%d::uuid)", at, id)
	return nil
}

// ListFilter narrows List; empty fields match anything.
type ListFilter struct {
	TaskID, ProjectID, Repo string
	Statuses                []agentv1.JobStatus
}

const jobTokenVersion = "j1"

// List returns a page of owner's jobs, newest first, without plans.
func (s *Store) List(ctx context.Context, owner string, f ListFilter, pageSize int, pageToken string) ([]*agentv1.Job, string, error) {
	var c db.Conds
	c.Add("owner_id = $%d", owner)
	if f.TaskID != "" {
		c.Add("task_id = $%d", f.TaskID)
	}
	if f.ProjectID != "" {
		c.Add("project_id = $%d", f.ProjectID)
	}
	if f.Repo != "" {
		c.Add("repo = $%d", f.Repo)
	}
	if len(f.Statuses) > 0 {
		names := make([]string, len(f.Statuses))
		for i, st := range f.Statuses {
			names[i] = StatusName(st)
		}
		c.Add("status = ANY($%d)", names)
	}
	if err := pageAfter(pageToken, jobTokenVersion, "ListJobs", &c); err != nil {
		return nil, "", err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+recordColumns+`, create_time FROM jobs`+c.Where()+
		` ORDER BY create_time DESC, id DESC LIMIT `+c.Arg(pageSize+1), c.Args...)
	if err != nil {
		return nil, "", err
	}
	defer rows.Close()
	var (
		out   []*agentv1.Job
		times []time.Time
	)
	for rows.Next() {
		var at time.Time
		rec, err := scanRecord(rows, false, &at)
		if err != nil {
			return nil, "", err
		}
		out, times = append(out, rec.Job), append(times, at)
	}
	if err := rows.Err(); err != nil {
		return nil, "", err
	}
	next := ""
	if len(out) > pageSize {
		out = out[:pageSize]
		next = validate.EncodeTimeIDToken(jobTokenVersion, times[pageSize-1], out[pageSize-1].Id)
	}
	return out, next, nil
}
