package service

import (
	"github.com/thefold/thefold/pkg/errs"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/validate"

	"github.com/thefold/thefold/services/tasks/internal/store"
)

// Limits on input. They keep a row, an event and a list page bounded.
const (
	maxTitle       = 500
	maxDescription = 65536
	maxLabel       = 64
	maxLabels      = 50
	maxBlockedBy   = 100
	maxExternalID  = 200
	maxJobID       = 200
	maxReason      = 2000
	maxComplexity  = 10
	maxPageSize    = 200
	defaultPage    = 50
)

// maxRequestID bounds a caller's request_id and a batch key.
const maxRequestID = validate.MaxRequestID

// checkPullRequest accepts no reference, or one with a repository, a positive number and an
// optional URL.
func checkPullRequest(field string, pr *typev1.PullRequestRef) error {
	if pr == nil || (pr.Repo == "" && pr.Number == 0 && pr.Url == "") {
		return nil
	}
	if err := validate.Repo(field+".repo", pr.Repo, true); err != nil {
		return err
	}
	if pr.Number <= 0 {
		return errs.Invalid(field+".number", "must be positive, got %d", pr.Number)
	}
	return validate.URL(field+".url", pr.Url)
}

// checkTaskFields validates the fields of t named in fields (store.UpdatableFields names),
// normalizing title and labels in place; prefix is prepended to field names in errors.
func checkTaskFields(prefix string, t *tasksv1.Task, fields []string) error {
	for _, f := range fields {
		name := prefix + f
		var err error
		switch f {
		case "title":
			t.Title, err = validate.RequiredText(name, t.Title, maxTitle)
		case "description":
			err = validate.MaxLen(name, t.Description, maxDescription)
		case "priority":
			err = validate.Enum(name, t.Priority, false)
		case "labels":
			t.Labels, err = validate.Labels(name, t.Labels, maxLabel, maxLabels)
		case "repo":
			err = validate.Repo(name, t.Repo, true)
		case "external_url":
			err = validate.URL(name, t.ExternalUrl)
		case "job_id":
			err = validate.MaxLen(name, t.JobId, maxJobID)
		case "pull_request":
			err = checkPullRequest(name, t.PullRequest)
		case "complexity":
			if t.Complexity < 0 || t.Complexity > maxComplexity {
				err = errs.Invalid(name, "want 0 to %d, got %d", maxComplexity, t.Complexity)
			}
		case "estimated_tokens":
			if t.EstimatedTokens < 0 {
				err = errs.Invalid(name, "must not be negative")
			}
		case "planned_order":
			if t.PlannedOrder < 0 {
				err = errs.Invalid(name, "must not be negative")
			}
		case "project_id":
			// Canonical form, so a filter matches whatever case the id was given in.
			t.ProjectId, err = validate.UUID(name, t.ProjectId, false)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Page tokens are validate's (time, id) tokens: "v1:<create_time in µs>:<id>".
const pageTokenVersion = "v1"

func encodePageToken(c *store.Cursor) string {
	if c == nil {
		return ""
	}
	return validate.EncodeTimeIDToken(pageTokenVersion, c.CreateTime, c.ID)
}

func decodePageToken(tok string) (*store.Cursor, error) {
	if tok == "" {
		return nil, nil
	}
	at, id, err := validate.DecodeTimeIDToken(tok, pageTokenVersion, "ListTasks")
	if err != nil {
		return nil, err
	}
	return &store.Cursor{CreateTime: at, ID: id}, nil
}
