package store

import (
	"context"

	"github.com/thefold/thefold/pkg/db"
	builderv1 "github.com/thefold/thefold/pkg/gen/thefold/builder/v1"
	"github.com/thefold/thefold/pkg/validate"
)

// ListFilter narrows List; empty fields match anything.
type ListFilter struct {
	TaskID, JobID, Repo string
	Statuses            []builderv1.BuildStatus
}

const pageTokenVersion = "b1"

// List returns a page of owner's builds, newest first, and the next page's token.
func (s *Store) List(ctx context.Context, owner string, f ListFilter, pageSize int, pageToken string) ([]*Build, string, error) {
	var c db.Conds
	c.Add("owner_id = $%d", owner)
	if f.TaskID != "" {
		c.Add("task_id = $%d", f.TaskID)
	}
	if f.JobID != "" {
		c.Add("job_id = $%d", f.JobID)
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
	if pageToken != "" {
		at, id, err := validate.DecodeTimeIDToken(pageToken, pageTokenVersion, "ListBuilds")
		if err != nil {
			return nil, "", err
		}
		c.Add("(create_time, id) < ($%d, $%d::uuid)", at, id)
	}
	rows, err := s.pool.Query(ctx, `SELECT `+buildColumns+` FROM builds`+c.Where()+
		` ORDER BY create_time DESC, id DESC LIMIT `+c.Arg(pageSize+1), c.Args...)
	if err != nil {
		return nil, "", err
	}
	defer rows.Close()
	var out []*Build
	for rows.Next() {
		b, err := scanBuild(rows)
		if err != nil {
			return nil, "", err
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, "", err
	}
	next := ""
	if len(out) > pageSize {
		out = out[:pageSize]
		last := out[len(out)-1]
		next = validate.EncodeTimeIDToken(pageTokenVersion, last.CreateTime.AsTime(), last.Id)
	}
	return out, next, nil
}
