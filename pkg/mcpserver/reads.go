package mcpserver

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	mcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/thefold/thefold/pkg/errs"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	memoryv1 "github.com/thefold/thefold/pkg/gen/thefold/memory/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	"github.com/thefold/thefold/pkg/protoenum"
	"github.com/thefold/thefold/pkg/validate"
)

// The read-only tools.

type ReviewIDInput struct {
	ReviewID string `json:"review_id" jsonschema:"the review's id (a job's review_id)"`
}

func (t *tools) getReview(ctx context.Context, _ *mcp.CallToolRequest, in ReviewIDInput) (Review, string, error) {
	reviewID, err := id("review_id", in.ReviewID)
	if err != nil {
		return Review{}, "", callError("", err)
	}
	resp, err := t.c.Reviews().GetReview(ctx, &agentv1.GetReviewRequest{Id: reviewID})
	if err != nil {
		return Review{}, "", callError("get the review", err)
	}
	v := reviewView(resp.GetReview())
	text := fmt.Sprintf("Review %s of %s: %s, quality %d/10, %d files (+%d −%d), %d concerns.", v.ID, v.Repo, v.Status, v.QualityScore,
		v.FilesChanged, v.Additions, v.Deletions, len(v.Concerns))
	if v.Next != "" {
		text += " " + v.Next
	}
	return v, text, nil
}

// Search limits.
const (
	defaultMemories = 10
	maxMemories     = 50
	defaultFiles    = 10
	maxFiles        = 100
	// filesBudget is the tokens of file content find_relevant_files asks for: the best
	// files whole or outlined, the rest listed.
	filesBudget = 8000
	maxFileText = 12000
	defaultList = 50
	maxList     = 200
)

type SearchMemoryInput struct {
	Query string `json:"query" jsonschema:"what to find memories for, e.g. a task description or an error message"`
	Repo  string `json:"repo,omitempty" jsonschema:"only memories of this repository (owner/name); empty searches all"`
	Limit int    `json:"limit,omitempty" jsonschema:"most results (1–50, default 10)"`
}

var searchMemorySchema = schemaOf[SearchMemoryInput](func(p map[string]*jsonschema.Schema) {
	bounds(p["limit"], 1, maxMemories, defaultMemories)
})

// MemoryResults is search_memory's result.
type MemoryResults struct {
	Memories       []Memory `json:"memories"`
	EmbeddingModel string   `json:"embedding_model,omitempty"`
}

// limit checks an optional count input: 0 is def, otherwise 1–hi.
func limit(field string, n, def, hi int) (int32, error) {
	switch {
	case n == 0:
		return int32(def), nil
	case n < 0 || n > hi:
		return 0, errs.Invalid(field, "must be 1–%d, got %d", hi, n)
	}
	return int32(n), nil
}

func checkSearchMemory(in SearchMemoryInput) (*memoryv1.SearchMemoriesRequest, error) {
	q, err := validate.RequiredText("query", in.Query, maxText)
	if err != nil {
		return nil, err
	}
	repo := strings.TrimSpace(in.Repo)
	if err := validate.Repo("repo", repo, false); err != nil {
		return nil, err
	}
	n, err := limit("limit", in.Limit, defaultMemories, maxMemories)
	if err != nil {
		return nil, err
	}
	return &memoryv1.SearchMemoriesRequest{Query: q, Repo: repo, Limit: n}, nil
}

func (t *tools) searchMemory(ctx context.Context, _ *mcp.CallToolRequest, in SearchMemoryInput) (MemoryResults, string, error) {
	req, err := checkSearchMemory(in)
	if err != nil {
		return MemoryResults{}, "", callError("", err)
	}
	resp, err := t.c.Memory().SearchMemories(ctx, req)
	if err != nil {
		return MemoryResults{}, "", callError("search memory", err)
	}
	out := MemoryResults{Memories: []Memory{}, EmbeddingModel: resp.GetEmbeddingModel()}
	for _, r := range resp.GetResults() {
		out.Memories = append(out.Memories, memoryView(r))
	}
	return out, fmt.Sprintf("%d memories found for %q.", len(out.Memories), cutText(req.Query, 80)), nil
}

type RelevantFilesInput struct {
	Repo     string `json:"repo" jsonschema:"the repository, owner/name"`
	Query    string `json:"query" jsonschema:"what the files should be relevant to, e.g. a task description"`
	MaxFiles int    `json:"max_files,omitempty" jsonschema:"most files to return (1–100, default 10)"`
}

var relevantFilesSchema = schemaOf[RelevantFilesInput](func(p map[string]*jsonschema.Schema) {
	bounds(p["max_files"], 1, maxFiles, defaultFiles)
})

// RelevantFiles is find_relevant_files's result.
type RelevantFiles struct {
	Repo            string         `json:"repo"`
	CommitSHA       string         `json:"commit_sha" jsonschema:"the commit of the default branch that was ranked"`
	Files           []RelevantFile `json:"files" jsonschema:"best first"`
	FilesConsidered int32          `json:"files_considered"`
}

func checkRelevantFiles(in RelevantFilesInput) (*githubv1.FindRelevantFilesRequest, error) {
	repo := strings.TrimSpace(in.Repo)
	if err := validate.Repo("repo", repo, true); err != nil {
		return nil, err
	}
	q, err := validate.RequiredText("query", in.Query, maxText)
	if err != nil {
		return nil, err
	}
	n, err := limit("max_files", in.MaxFiles, defaultFiles, maxFiles)
	if err != nil {
		return nil, err
	}
	return &githubv1.FindRelevantFilesRequest{Repo: repo, Task: q, MaxFiles: n, TokenBudget: filesBudget}, nil
}

func (t *tools) findRelevantFiles(ctx context.Context, _ *mcp.CallToolRequest, in RelevantFilesInput) (RelevantFiles, string, error) {
	req, err := checkRelevantFiles(in)
	if err != nil {
		return RelevantFiles{}, "", callError("", err)
	}
	resp, err := t.c.Repos().FindRelevantFiles(ctx, req)
	if err != nil {
		return RelevantFiles{}, "", callError("rank the files", err)
	}
	out := RelevantFiles{Repo: req.Repo, CommitSHA: resp.GetCommitSha(), Files: []RelevantFile{}, FilesConsidered: resp.GetFilesConsidered()}
	var paths []string
	for _, f := range resp.GetFiles() {
		out.Files = append(out.Files, RelevantFile{Path: f.GetPath(), Score: f.GetScore(), Reason: f.GetReason(), Tokens: f.GetTokens(),
			Inclusion: protoenum.Name(f.GetInclusion(), "RELEVANT_FILE_INCLUSION_"), Content: cutText(f.GetContent(), maxFileText)})
		if len(paths) < 5 {
			paths = append(paths, f.GetPath())
		}
	}
	return out, fmt.Sprintf("%d files of %s ranked (of %d considered); best: %s.", len(out.Files), out.Repo, out.FilesConsidered, strings.Join(paths, ", ")), nil
}

type ListReposInput struct {
	Owner     string `json:"owner,omitempty" jsonschema:"only repositories of this owner (the part of owner/name before the slash)"`
	PageToken string `json:"page_token,omitempty" jsonschema:"next_page_token of the previous call, for the next page"`
}

// RepoList is list_repos's result.
type RepoList struct {
	Repos         []Repo `json:"repos"`
	NextPageToken string `json:"next_page_token,omitempty" jsonschema:"pass as page_token for more; empty on the last page"`
}

func (t *tools) listRepos(ctx context.Context, _ *mcp.CallToolRequest, in ListReposInput) (RepoList, string, error) {
	resp, err := t.c.Repos().ListRepos(ctx, &githubv1.ListReposRequest{Owner: strings.TrimSpace(in.Owner), PageToken: in.PageToken, PageSize: 100})
	if err != nil {
		return RepoList{}, "", callError("list the repositories", err)
	}
	out := RepoList{Repos: []Repo{}, NextPageToken: resp.GetNextPageToken()}
	var names []string
	for _, r := range resp.GetRepos() {
		out.Repos = append(out.Repos, repoView(r))
		names = append(names, r.GetRepo())
	}
	if len(names) == 0 {
		return out, "No repositories.", nil
	}
	return out, fmt.Sprintf("%d repositories: %s.", len(names), cutText(strings.Join(names, ", "), 1000)), nil
}

type ListTasksInput struct {
	Repo      string   `json:"repo,omitempty" jsonschema:"only tasks of this repository (owner/name)"`
	Statuses  []string `json:"statuses,omitempty" jsonschema:"only tasks with one of these statuses"`
	Limit     int      `json:"limit,omitempty" jsonschema:"most tasks (1–200, default 50)"`
	PageToken string   `json:"page_token,omitempty" jsonschema:"next_page_token of the previous call, for the next page"`
}

// taskStatuses are the statuses list_tasks takes, by their short names.
var taskStatuses = func() []any {
	var out []any
	for n := range len(tasksv1.TaskStatus_name) {
		if s := protoenum.Name(tasksv1.TaskStatus(n), "TASK_STATUS_"); s != "" {
			out = append(out, s)
		}
	}
	return out
}()

var listTasksSchema = schemaOf[ListTasksInput](func(p map[string]*jsonschema.Schema) {
	bounds(p["limit"], 1, maxList, defaultList)
	p["statuses"].Items.Enum = taskStatuses
})

// TaskList is list_tasks's result.
type TaskList struct {
	Tasks         []Task `json:"tasks"`
	NextPageToken string `json:"next_page_token,omitempty" jsonschema:"pass as page_token for more; empty on the last page"`
}

func checkListTasks(in ListTasksInput) (*tasksv1.ListTasksRequest, error) {
	repo := strings.TrimSpace(in.Repo)
	if err := validate.Repo("repo", repo, false); err != nil {
		return nil, err
	}
	n, err := limit("limit", in.Limit, defaultList, maxList)
	if err != nil {
		return nil, err
	}
	req := &tasksv1.ListTasksRequest{Repo: repo, PageSize: n, PageToken: in.PageToken}
	for i, s := range in.Statuses {
		st := protoenum.Parse[tasksv1.TaskStatus](strings.TrimSpace(s), "TASK_STATUS_", tasksv1.TaskStatus_value)
		if st == tasksv1.TaskStatus_TASK_STATUS_UNSPECIFIED {
			return nil, errs.Invalid(fmt.Sprintf("statuses[%d]", i), "unknown status %q (want one of %v)", validate.Truncate(s, 40), taskStatuses)
		}
		req.Statuses = append(req.Statuses, st)
	}
	return req, nil
}

func (t *tools) listTasks(ctx context.Context, _ *mcp.CallToolRequest, in ListTasksInput) (TaskList, string, error) {
	req, err := checkListTasks(in)
	if err != nil {
		return TaskList{}, "", callError("", err)
	}
	resp, err := t.c.Tasks().ListTasks(ctx, req)
	if err != nil {
		return TaskList{}, "", callError("list the tasks", err)
	}
	out := TaskList{Tasks: []Task{}, NextPageToken: resp.GetNextPageToken()}
	for _, task := range resp.GetTasks() {
		out.Tasks = append(out.Tasks, taskView(task))
	}
	text := fmt.Sprintf("%d tasks.", len(out.Tasks))
	if out.NextPageToken != "" {
		text += " More with page_token."
	}
	return out, text, nil
}
