package loop

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"

	"github.com/thefold/thefold/services/agent/internal/store"
)

const jobID = "3ae2b3ae-69e8-45a8-ac6a-4377c335dd4b"

func TestBranchName(t *testing.T) {
	for title, want := range map[string]string{
		"Add a Hello function to the greet package": "thefold/add-a-hello-function-to-the-greet-packag-3ae2b3ae",
		"Fix: crash on ÆØÅ input!!":                 "thefold/fix-crash-on-input-3ae2b3ae",
		"???":                                       "thefold/task-3ae2b3ae",
	} {
		if got := branchName(title, jobID); got != want {
			t.Errorf("branchName(%q) = %q, want %q", title, got, want)
		}
	}
}

func TestDiagnosticsText(t *testing.T) {
	ds := []*typev1.Diagnostic{
		{Path: "a.go", Line: 3, Message: "undefined: x", Rule: "typecheck"},
		{Message: "build failed"},
		{Path: "b.go", Message: "unused"},
	}
	if got, want := diagnosticsText(ds, 2), "a.go:3: undefined: x (typecheck)\nbuild failed\n… and 1 more"; got != want {
		t.Errorf("diagnosticsText = %q, want %q", got, want)
	}
}

func TestTruncateKeepsUTF8(t *testing.T) {
	s := strings.Repeat("ø", 10)
	got := truncate(s, 5)
	if !utf8.ValidString(got) || !strings.HasSuffix(got, "…") || len(got) > 5+len("…") {
		t.Errorf("truncate = %q", got)
	}
	if truncate("short", 10) != "short" {
		t.Error("a short string was changed")
	}
}

// Restart begins a new run: new keys (generation), counters back, the plan kept to revise.
func TestRestart(t *testing.T) {
	plan := &typev1.Plan{Summary: "p"}
	rec := &store.Record{
		Job:     &agentv1.Job{Id: jobID, Attempt: 4, PlanRevisions: 2, BuildId: "b", Plan: plan},
		Context: &aiv1.PlanTaskRequest{},
		State:   store.State{Generation: 1, Failures: 3, Fingerprints: []string{"a", "a"}, Intervened: true, BackoffUntil: time.Now()},
	}
	r := &run{rec: rec}
	before := r.key("plan", 1)
	Restart(rec)
	j, st := rec.Job, rec.State
	if j.Attempt != 1 || j.PlanRevisions != 0 || j.BuildId != "" || st.Generation != 2 || st.Failures != 0 || st.Fingerprints != nil ||
		st.Intervened || !st.BackoffUntil.IsZero() || rec.Context.PreviousPlan != plan {
		t.Fatalf("after Restart: job %v, state %+v", j, st)
	}
	if after := r.key("plan", 1); after == before || !strings.HasPrefix(after, jobID+":g2:") || len(after) > 128 {
		t.Errorf("keys %q → %q", before, after)
	}
}

func TestPermanent(t *testing.T) {
	for code, want := range map[codes.Code]bool{
		codes.InvalidArgument: true, codes.NotFound: true, codes.FailedPrecondition: true, codes.PermissionDenied: true,
		codes.Unavailable: false, codes.DeadlineExceeded: false, codes.Internal: false, codes.ResourceExhausted: false,
	} {
		if got := permanent(status.Error(code, "x")); got != want {
			t.Errorf("permanent(%v) = %v", code, got)
		}
	}
	if permanent(errors.New("plain")) {
		t.Error("a plain error is permanent")
	}
	// ai's daily spend limit lasts until the next UTC day: the job fails with its message.
	limit, _ := status.New(codes.ResourceExhausted, "daily AI spend limit reached").WithDetails(
		&errdetails.ErrorInfo{Domain: "ai.thefold.dev", Reason: "DAILY_SPEND_LIMIT_EXCEEDED"})
	if !permanent(fmt.Errorf("plan: %w", limit.Err())) {
		t.Error("the daily spend limit is retried")
	}
	rate, _ := status.New(codes.ResourceExhausted, "provider rate-limited").WithDetails(
		&errdetails.ErrorInfo{Domain: "ai.thefold.dev", Reason: "PROVIDER_RATE_LIMITED"})
	if permanent(rate.Err()) {
		t.Error("a provider's rate limit is permanent")
	}
}

// The next build may spend what is left of the job's budget, never nothing.
func TestRemaining(t *testing.T) {
	r := &run{since: time.Now(), rec: &store.Record{Job: &agentv1.Job{
		Budget: &typev1.Budget{MaxTokens: 1000, MaxCostMicros: 50, MaxWallTime: durationpb.New(time.Hour)},
		Usage:  &typev1.Usage{InputTokens: 300, OutputTokens: 100, CostMicros: 80},
	}, State: store.State{Active: 10 * time.Minute}}}
	got := r.remaining()
	if got.MaxTokens != 600 || got.MaxCostMicros != 1 || got.MaxWallTime.AsDuration() > 50*time.Minute || got.MaxWallTime.AsDuration() < 49*time.Minute {
		t.Errorf("remaining = %v", got)
	}
}

// The build is given the task and the context phase's paths within StartBuild's bounds:
// a title of at most 500 characters, a description of at most 100,000 bytes, at most 200
// valid paths, each once.
func TestBuildTaskAndContextPathsFitStartBuild(t *testing.T) {
	files := []*aiv1.ContextFile{{Path: "a.go"}, {Path: "../escape.go"}, {Path: "a.go"}, {Path: "/abs.go"}, {Path: "b/c.go"}}
	for i := range 300 {
		files = append(files, &aiv1.ContextFile{Path: fmt.Sprintf("many/f%03d.go", i)})
	}
	r := &run{rec: &store.Record{Context: &aiv1.PlanTaskRequest{
		Task:         &aiv1.TaskSpec{Title: strings.Repeat("é", 600), Description: strings.Repeat("d", 40_000) + strings.Repeat("ü", 40_000)},
		ContextFiles: files,
	}}}
	title, desc := r.buildTask()
	if n := utf8.RuneCountInString(title); n != 500 || !strings.HasPrefix(title, strings.Repeat("é", 499)) {
		t.Errorf("title of %d characters", n)
	}
	if len(desc) > 100_000 || !strings.HasPrefix(desc, strings.Repeat("d", 40_000)) || !utf8.ValidString(desc) {
		t.Errorf("description of %d bytes", len(desc))
	}
	paths := r.contextPaths()
	if len(paths) != 200 || paths[0] != "a.go" || paths[1] != "b/c.go" || paths[2] != "many/f000.go" {
		t.Errorf("%d context paths, starting %v", len(paths), paths[:min(3, len(paths))])
	}
	// A task within the bounds is given as it is.
	r.rec.Context.Task = &aiv1.TaskSpec{Title: strings.Repeat("é", 500), Description: strings.Repeat("d", 100_000)}
	if title, desc := r.buildTask(); title != r.rec.Context.Task.Title || desc != r.rec.Context.Task.Description {
		t.Error("a task within the bounds was cut")
	}
}

// A resumed job asks for its build with the same budget as before the crash: the builder
// refuses a retry of a key with a different request.
func TestRemainingBudgetDependsOnTheCheckpointOnly(t *testing.T) {
	rec := &store.Record{Job: &agentv1.Job{Budget: &typev1.Budget{MaxTokens: 100, MaxWallTime: durationpb.New(time.Hour)},
		Usage: &typev1.Usage{InputTokens: 30}}}
	rec.State.Active = 10 * time.Minute
	first := (&run{rec: rec, since: time.Now().Add(-time.Minute)}).remaining()
	second := (&run{rec: rec, since: time.Now()}).remaining()
	if !proto.Equal(first, second) || first.MaxTokens != 70 || first.MaxWallTime.AsDuration() != 50*time.Minute {
		t.Fatalf("remaining before and after a resume: %v, %v", first, second)
	}
}
