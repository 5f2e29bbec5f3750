// Package api is the thefold command's client of the gateway's REST edge: the calls the
// demo and the eval make as the stack's admin (repositories on the local forge, tasks, jobs,
// reviews, builds, metrics), with the JSON shapes they read.
package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Client calls the gateway's REST edge with a bearer token.
type Client struct {
	Base, Token string
	HC          *http.Client
}

// New is a Client of the gateway at base with token and a one-minute request timeout.
func New(base, token string) *Client {
	return &Client{Base: base, Token: strings.TrimSpace(token), HC: &http.Client{Timeout: time.Minute}}
}

// Error is a non-200 answer: the HTTP status and the API's message.
type Error struct {
	Status  int
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Status, http.StatusText(e.Status), e.Message)
}

// Do sends body (JSON, when not nil) and decodes a 200 answer into out (when not nil).
func (c *Client) Do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.HC.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct{ Message string }
		_ = json.Unmarshal(b, &e)
		return &Error{Status: resp.StatusCode, Message: e.Message}
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(b, out)
}

// Int64 reads a protobuf int64, which protojson writes as a string.
type Int64 int64

// UnmarshalJSON takes "123" and 123.
func (n *Int64) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	if s == "" || s == "null" {
		*n = 0
		return nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("int64 %s: %w", b, err)
	}
	*n = Int64(v)
	return nil
}

// Duration reads a google.protobuf.Duration, which protojson writes as "1.5s".
type Duration time.Duration

// UnmarshalJSON takes "1.5s".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Usage is thefold.type.v1.Usage.
type Usage struct {
	Model        string
	Provider     string
	InputTokens  Int64 `json:"input_tokens"`
	OutputTokens Int64 `json:"output_tokens"`
	CostMicros   Int64 `json:"cost_micros"`
	Calls        int32
}

// Job is the part of an agent job the command reads.
type Job struct {
	ID            string
	Status        string
	Phase         string
	Error         string
	StatusReason  string `json:"status_reason"`
	Attempt       int32
	Model         string
	ReviewID      string `json:"review_id"`
	Usage         Usage
	LastDiagnosis struct {
		Category string
		Reason   string
	} `json:"last_diagnosis"`
	PullRequest struct {
		Number int32
		URL    string
	} `json:"pull_request"`
}

// stopped are the statuses a job does not leave by itself: terminal, or waiting for a person
// to answer. (PENDING_REVIEW is not one: a job approved a moment ago still shows it.)
var stopped = []string{"JOB_STATUS_FAILED", "JOB_STATUS_CANCELLED", "JOB_STATUS_HUMAN_NEEDED", "JOB_STATUS_REJECTED",
	"JOB_STATUS_SKIPPED", "JOB_STATUS_COMPLETED", "JOB_STATUS_WAITING_CLARIFICATION"}

// StoppedError is a job that stopped somewhere other than where it was waited for.
type StoppedError struct {
	Job *Job
}

func (e *StoppedError) Error() string {
	why := e.Job.Error
	if why == "" {
		why = e.Job.StatusReason
	}
	return fmt.Sprintf("job %s ended %s: %s", e.Job.ID, e.Job.Status, why)
}

// GetJob reads a job.
func (c *Client) GetJob(ctx context.Context, id string) (*Job, error) {
	var got struct{ Job Job }
	if err := c.Do(ctx, http.MethodGet, "/v1/jobs/"+id, nil, &got); err != nil {
		return nil, err
	}
	return &got.Job, nil
}

// WaitJob polls a job every poll until it reaches want, calling progress (when not nil)
// with each read. A job that stops elsewhere (failed, needs a human, …) is a
// *StoppedError holding it; one still going after limit is an error saying where it is.
func (c *Client) WaitJob(ctx context.Context, id, want string, limit, poll time.Duration, progress func(*Job)) (*Job, error) {
	deadline := time.Now().Add(limit)
	for {
		j, err := c.GetJob(ctx, id)
		if err != nil {
			return nil, err
		}
		if progress != nil {
			progress(j)
		}
		if j.Status == want {
			return j, nil
		}
		for _, s := range stopped {
			if j.Status == s {
				return j, &StoppedError{Job: j}
			}
		}
		if time.Now().After(deadline) {
			return j, fmt.Errorf("job %s is still %s (%s) after %s", id, j.Status, j.Phase, limit)
		}
		select {
		case <-ctx.Done():
			return j, ctx.Err()
		case <-time.After(poll):
		}
	}
}

// File is a file committed to a repository.
type File struct {
	Path, Content string
}

// CreateRepo creates repo ("local/name") on the local forge with its initial commit (a
// README and a .gitignore), then commits files to main in one commit, replacing those two
// when files has them; it returns the clone URL.
func (c *Client) CreateRepo(ctx context.Context, repo, message string, files []File) (string, error) {
	var created struct {
		Repo struct {
			CloneURL string `json:"clone_url"`
		} `json:"repo"`
	}
	if err := c.Do(ctx, http.MethodPost, "/v1/repos", map[string]any{"repo": repo, "auto_init": true}, &created); err != nil {
		return "", fmt.Errorf("create %s: %w", repo, err)
	}
	var tree struct {
		Entries []struct{ Path string }
	}
	if err := c.Do(ctx, http.MethodGet, "/v1/repos/"+repo+"/tree?page_size=10000", nil, &tree); err != nil {
		return "", fmt.Errorf("read %s: %w", repo, err)
	}
	exists := map[string]bool{}
	for _, e := range tree.Entries {
		exists[e.Path] = true
	}
	fs := make([]map[string]any, 0, len(files))
	for _, f := range files {
		action := "FILE_ACTION_CREATE"
		if exists[f.Path] {
			action = "FILE_ACTION_MODIFY"
		}
		fs = append(fs, map[string]any{"path": f.Path, "action": action, "content": f.Content})
	}
	if err := c.Do(ctx, http.MethodPost, "/v1/repos/"+repo+"/commits", map[string]any{"branch": "main", "message": message, "files": fs}, nil); err != nil {
		return "", fmt.Errorf("commit to %s: %w", repo, err)
	}
	return created.Repo.CloneURL, nil
}

// StartTask creates a task on repo and starts a job for it.
func (c *Client) StartTask(ctx context.Context, repo, title, description string) (taskID, jobID string, err error) {
	var task struct {
		Task struct{ ID string } `json:"task"`
	}
	if err := c.Do(ctx, http.MethodPost, "/v1/tasks", map[string]any{"title": title, "description": description, "repo": repo}, &task); err != nil {
		return "", "", fmt.Errorf("create the task: %w", err)
	}
	var started struct {
		Job struct{ ID string } `json:"job"`
	}
	if err := c.Do(ctx, http.MethodPost, "/v1/jobs", map[string]any{"task_id": task.Task.ID}, &started); err != nil {
		return task.Task.ID, "", fmt.Errorf("start the job: %w", err)
	}
	return task.Task.ID, started.Job.ID, nil
}

// ReviewFile is one changed file of a review.
type ReviewFile struct {
	Diff struct {
		Path      string
		Action    string
		Additions int32
		Deletions int32
		Binary    bool
	}
	Content string
}

// Review is the part of a review the command reads.
type Review struct {
	ID           string
	Status       string
	QualityScore int32 `json:"quality_score"`
	Summary      string
	Files        []ReviewFile
}

// GetReview reads a review with its files' contents.
func (c *Client) GetReview(ctx context.Context, id string) (*Review, error) {
	var got struct{ Review Review }
	if err := c.Do(ctx, http.MethodGet, "/v1/reviews/"+id, nil, &got); err != nil {
		return nil, err
	}
	return &got.Review, nil
}

// Metrics is a job's usage and time (GET /v1/jobs/{id}/metrics).
type Metrics struct {
	Total         Usage
	TotalDuration Duration `json:"total_duration"`
	Phases        []struct {
		Phase    string
		Models   []string
		Duration Duration
	}
}

// JobMetrics reads a job's metrics.
func (c *Client) JobMetrics(ctx context.Context, id string) (*Metrics, error) {
	var m Metrics
	if err := c.Do(ctx, http.MethodGet, "/v1/jobs/"+id+"/metrics", nil, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// Build is the part of a builder build the command reads.
type Build struct {
	ID     string
	Status string
	Report struct {
		FixRounds         int32 `json:"fix_rounds"`
		FixRoundsResolved int32 `json:"fix_rounds_resolved"`
		ValidationPassed  bool  `json:"validation_passed"`
	}
}

// JobBuilds lists a job's builds (one per attempt), newest first.
func (c *Client) JobBuilds(ctx context.Context, jobID string) ([]Build, error) {
	var out []Build
	token := ""
	for {
		var page struct {
			Builds        []Build
			NextPageToken string `json:"next_page_token"`
		}
		path := "/v1/builds?page_size=200&job_id=" + url.QueryEscape(jobID)
		if token != "" {
			path += "&page_token=" + url.QueryEscape(token)
		}
		if err := c.Do(ctx, http.MethodGet, path, nil, &page); err != nil {
			return nil, err
		}
		out = append(out, page.Builds...)
		if page.NextPageToken == "" {
			return out, nil
		}
		token = page.NextPageToken
	}
}
