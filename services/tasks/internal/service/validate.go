package service

import (
	"encoding/base64"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/thefold/thefold/pkg/errs"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"

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
	maxURL         = 2048
	maxJobID       = 200
	maxReason      = 2000
	maxComplexity  = 10
	maxPageSize    = 200
	defaultPage    = 50
	maxRepo        = 200
)

// repoPattern is "owner/name" as forges allow them: letters, digits, '-', '_' and '.'.
var repoPattern = regexp.MustCompile(`^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$`)

// checkRepo validates an "owner/name" repository; an empty one is accepted unless required.
func checkRepo(field, repo string, required bool) error {
	switch {
	case repo == "" && required:
		return errs.Invalid(field, "required")
	case repo == "":
		return nil
	case len(repo) > maxRepo:
		return errs.Invalid(field, "at most %d characters", maxRepo)
	case !repoPattern.MatchString(repo):
		return errs.Invalid(field, "want \"owner/name\", got %q", repo)
	}
	owner, name, _ := strings.Cut(repo, "/")
	if strings.Trim(owner, ".") == "" || strings.Trim(name, ".") == "" {
		return errs.Invalid(field, "want \"owner/name\", got %q", repo)
	}
	return nil
}

// parseID returns id in canonical (lower-case, hyphenated) form, or InvalidArgument
// naming field. An empty id is accepted unless required.
func parseID(field, id string, required bool) (string, error) {
	if id == "" {
		if required {
			return "", errs.Invalid(field, "required")
		}
		return "", nil
	}
	u, err := uuid.Parse(id)
	if err != nil || len(id) != 36 {
		return "", errs.Invalid(field, "not a UUID: %q", truncate(id, 64))
	}
	return u.String(), nil
}

func checkTitle(field, title string) (string, error) {
	title = strings.TrimSpace(title)
	switch {
	case title == "":
		return "", errs.Invalid(field, "required")
	case utf8.RuneCountInString(title) > maxTitle:
		return "", errs.Invalid(field, "at most %d characters", maxTitle)
	}
	return title, nil
}

func checkLen(field, v string, max int) error {
	if utf8.RuneCountInString(v) > max {
		return errs.Invalid(field, "at most %d characters", max)
	}
	return nil
}

// checkURL accepts "" or an absolute http(s) URL.
func checkURL(field, v string) error {
	if v == "" {
		return nil
	}
	if err := checkLen(field, v, maxURL); err != nil {
		return err
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errs.Invalid(field, "want an absolute http or https URL")
	}
	return nil
}

// normalizeLabels trims labels, drops empty ones and duplicates, keeping first-seen order.
func normalizeLabels(field string, labels []string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, l := range labels {
		l = strings.TrimSpace(l)
		if l == "" || seen[l] {
			continue
		}
		if utf8.RuneCountInString(l) > maxLabel {
			return nil, errs.Invalid(field, "label %q: at most %d characters", truncate(l, maxLabel), maxLabel)
		}
		seen[l] = true
		out = append(out, l)
	}
	if len(out) > maxLabels {
		return nil, errs.Invalid(field, "at most %d labels", maxLabels)
	}
	return out, nil
}

func checkStatus(field string, s tasksv1.TaskStatus, allowUnspecified bool) error {
	if _, ok := tasksv1.TaskStatus_name[int32(s)]; !ok || (!allowUnspecified && s == tasksv1.TaskStatus_TASK_STATUS_UNSPECIFIED) {
		return errs.Invalid(field, "not a task status: %d", s)
	}
	return nil
}

func checkSource(field string, s tasksv1.TaskSource) error {
	if _, ok := tasksv1.TaskSource_name[int32(s)]; !ok {
		return errs.Invalid(field, "not a task source: %d", s)
	}
	return nil
}

func checkPriority(field string, p typev1.Priority, allowUnspecified bool) error {
	if _, ok := typev1.Priority_name[int32(p)]; !ok || (!allowUnspecified && p == typev1.Priority_PRIORITY_UNSPECIFIED) {
		return errs.Invalid(field, "not a priority: %d", p)
	}
	return nil
}

// checkPullRequest accepts no reference, or one with a repository, a positive number and an
// optional URL.
func checkPullRequest(field string, pr *typev1.PullRequestRef) error {
	if pr == nil || (pr.Repo == "" && pr.Number == 0 && pr.Url == "") {
		return nil
	}
	if err := checkRepo(field+".repo", pr.Repo, true); err != nil {
		return err
	}
	if pr.Number <= 0 {
		return errs.Invalid(field+".number", "must be positive, got %d", pr.Number)
	}
	return checkURL(field+".url", pr.Url)
}

// maxRequestID bounds a caller's request_id.
const maxRequestID = 128

// checkRequestID accepts "" (no idempotency) or a printable key of at most maxRequestID bytes.
func checkRequestID(field, id string) error {
	if len(id) > maxRequestID {
		return errs.Invalid(field, "at most %d bytes", maxRequestID)
	}
	for _, r := range id {
		if r < 0x21 || r > 0x7e {
			return errs.Invalid(field, "printable ASCII without spaces only")
		}
	}
	return nil
}

// checkTaskFields validates the fields of t named in fields (store.UpdatableFields names),
// normalizing title and labels in place; prefix is prepended to field names in errors.
func checkTaskFields(prefix string, t *tasksv1.Task, fields []string) error {
	for _, f := range fields {
		name := prefix + f
		var err error
		switch f {
		case "title":
			t.Title, err = checkTitle(name, t.Title)
		case "description":
			err = checkLen(name, t.Description, maxDescription)
		case "priority":
			err = checkPriority(name, t.Priority, false)
		case "labels":
			t.Labels, err = normalizeLabels(name, t.Labels)
		case "repo":
			err = checkRepo(name, t.Repo, true)
		case "external_url":
			err = checkURL(name, t.ExternalUrl)
		case "job_id":
			err = checkLen(name, t.JobId, maxJobID)
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
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// checkPageSize maps 0 to the default page size.
func checkPageSize(n int32) (int, error) {
	switch {
	case n < 0 || n > maxPageSize:
		return 0, errs.Invalid("page_size", "want 0 to %d, got %d", maxPageSize, n)
	case n == 0:
		return defaultPage, nil
	}
	return int(n), nil
}

// Page tokens are opaque to clients: "v1:<create_time in µs>:<id>", base64url-encoded.
const pageTokenVersion = "v1"

// maxTokenMicros is the end of year 9999, past which PostgreSQL has no timestamps.
const maxTokenMicros = 253402300799999999

func encodePageToken(c *store.Cursor) string {
	if c == nil {
		return ""
	}
	raw := pageTokenVersion + ":" + strconv.FormatInt(c.CreateTime.UnixMicro(), 10) + ":" + c.ID
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

func decodePageToken(tok string) (*store.Cursor, error) {
	if tok == "" {
		return nil, nil
	}
	bad := errs.Invalid("page_token", "not a token from a previous ListTasks response")
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return nil, bad
	}
	parts := strings.Split(string(raw), ":")
	if len(parts) != 3 || parts[0] != pageTokenVersion {
		return nil, bad
	}
	micros, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || micros < 0 || micros > maxTokenMicros {
		return nil, bad
	}
	id, err := uuid.Parse(parts[2])
	if err != nil {
		return nil, bad
	}
	return &store.Cursor{CreateTime: time.UnixMicro(micros).UTC(), ID: id.String()}, nil
}

func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}
