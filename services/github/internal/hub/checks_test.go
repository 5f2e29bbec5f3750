package hub

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/thefold/thefold/pkg/errs"
	"github.com/thefold/thefold/pkg/fakegithub"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	"github.com/thefold/thefold/services/github/internal/forge"
)

// checksPR is prRepo with pull request #1 open from "feature"; it returns the head sha.
func checksPR(t *testing.T) (*fakeGH, *Provider, string) {
	t.Helper()
	f, p := prRepo(t)
	pr, _ := try2(p.CreatePullRequest(t.Context(), forge.NewPullRequest{Repo: "octo/app", Head: "feature", Title: "Feature"}))
	if pr.Number != 1 || pr.HeadSha == "" {
		t.Fatalf("pull request = %v", pr)
	}
	return f, p, pr.HeadSha
}

func TestPullRequestChecks(t *testing.T) {
	t.Parallel()
	const (
		none    = githubv1.CheckState_CHECK_STATE_NONE
		pending = githubv1.CheckState_CHECK_STATE_PENDING
		success = githubv1.CheckState_CHECK_STATE_SUCCESS
		failure = githubv1.CheckState_CHECK_STATE_FAILURE
	)
	runsURL := "https://github.example/octo/app/runs/"
	cases := []struct {
		name     string
		runs     []fakegithub.CheckRun
		statuses []fakegithub.Status
		want     githubv1.CheckState
		checks   []*githubv1.Check
	}{
		{name: "none", want: none},
		{
			name: "pending",
			runs: []fakegithub.CheckRun{
				{Name: "test", Status: "in_progress"},
				{Name: "build", Status: "completed", Conclusion: "success", Title: "Built", DetailsURL: "https://ci.example/b/1"},
				{Name: "deploy", Status: "queued"},
			},
			statuses: []fakegithub.Status{{Context: "ci/legacy", State: "pending", Description: "Waiting", TargetURL: "https://legacy.example/1"}},
			want:     pending,
			checks: []*githubv1.Check{
				{Name: "build", State: success, Conclusion: "success", Summary: "Built", DetailsUrl: "https://ci.example/b/1"},
				{Name: "ci/legacy", State: pending, Conclusion: "pending", Summary: "Waiting", DetailsUrl: "https://legacy.example/1", Status: true},
				{Name: "deploy", State: pending, Conclusion: "queued", DetailsUrl: runsURL + "7002"},
				{Name: "test", State: pending, Conclusion: "in_progress", DetailsUrl: runsURL + "7000"},
			},
		},
		{
			name: "success",
			runs: []fakegithub.CheckRun{
				{Name: "lint", Status: "completed", Conclusion: "neutral"},
				{Name: "build", Status: "completed", Conclusion: "success"},
				{Name: "docs", Status: "completed", Conclusion: "skipped"},
			},
			statuses: []fakegithub.Status{{Context: "ci/legacy", State: "success", Description: "Passed"}},
			want:     success,
			checks: []*githubv1.Check{
				{Name: "build", State: success, Conclusion: "success", DetailsUrl: runsURL + "7001"},
				{Name: "ci/legacy", State: success, Conclusion: "success", Summary: "Passed", Status: true},
				{Name: "docs", State: success, Conclusion: "skipped", DetailsUrl: runsURL + "7002"},
				{Name: "lint", State: success, Conclusion: "neutral", DetailsUrl: runsURL + "7000"},
			},
		},
		{
			name: "failure",
			runs: []fakegithub.CheckRun{
				{Name: "test", Status: "completed", Conclusion: "timed_out", Title: "Took too long"},
				{Name: "build", Status: "in_progress"},
				{Name: "approve", Status: "completed", Conclusion: "action_required"},
				{Name: "old", Status: "completed", Conclusion: "stale"},
				{Name: "gone", Status: "completed", Conclusion: "cancelled"},
			},
			statuses: []fakegithub.Status{
				{Context: "ci/a", State: "error", Description: "Crashed"},
				{Context: "ci/b", State: "failure"},
				{Context: "ci/c", State: "success"},
			},
			want: failure,
			checks: []*githubv1.Check{
				{Name: "approve", State: failure, Conclusion: "action_required", DetailsUrl: runsURL + "7002"},
				{Name: "build", State: pending, Conclusion: "in_progress", DetailsUrl: runsURL + "7001"},
				{Name: "ci/a", State: failure, Conclusion: "error", Summary: "Crashed", Status: true},
				{Name: "ci/b", State: failure, Conclusion: "failure", Status: true},
				{Name: "ci/c", State: success, Conclusion: "success", Status: true},
				{Name: "gone", State: failure, Conclusion: "cancelled", DetailsUrl: runsURL + "7004"},
				{Name: "old", State: failure, Conclusion: "stale", DetailsUrl: runsURL + "7003"},
				{Name: "test", State: failure, Conclusion: "timed_out", Summary: "Took too long", DetailsUrl: runsURL + "7000"},
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f, p, sha := checksPR(t)
			for _, r := range c.runs {
				f.AddCheckRun("octo/app", sha, r)
			}
			for _, s := range c.statuses {
				f.AddStatus("octo/app", sha, s)
			}
			got := try(p.PullRequestChecks(t.Context(), "octo/app", 1, forge.Actor{})).must(t)
			want := &githubv1.GetPullRequestChecksResponse{HeadSha: sha, State: c.want, Checks: c.checks}
			if !proto.Equal(got, want) {
				t.Errorf("PullRequestChecks =\n%v\nwant\n%v", got, want)
			}
			for _, kind := range []string{"check-runs", "status"} {
				q := f.requests("GET", "/commits/")
				var paths []string
				for _, r := range q {
					if strings.HasSuffix(r.Path, "/"+kind) {
						paths = append(paths, r.Path+"?"+r.Query)
					}
				}
				if wantPath := "/repos/octo/app/commits/" + sha + "/" + kind + "?"; len(paths) != 1 ||
					!strings.HasPrefix(paths[0], wantPath) || !strings.Contains(paths[0], "per_page=100") {
					t.Errorf("%s requests = %v, want one to %s with per_page=100", kind, paths, wantPath)
				}
			}
		})
	}
}

func TestPullRequestChecksReadsEveryPage(t *testing.T) {
	t.Parallel()
	f, p, sha := checksPR(t)
	for i := range 150 {
		f.AddCheckRun("octo/app", sha, fakegithub.CheckRun{Name: fmt.Sprintf("run-%03d", i), Status: "completed", Conclusion: "success"})
	}
	for i := range 120 {
		f.AddStatus("octo/app", sha, fakegithub.Status{Context: fmt.Sprintf("status-%03d", i), State: "success"})
	}
	f.AddStatus("octo/app", sha, fakegithub.Status{Context: "status-119", State: "failure"}) // the last, on page 2
	got := try(p.PullRequestChecks(t.Context(), "octo/app", 1, forge.Actor{})).must(t)
	if len(got.Checks) != 270 || got.State != githubv1.CheckState_CHECK_STATE_FAILURE ||
		got.Checks[0].Name != "run-000" || got.Checks[269].Name != "status-119" || got.Checks[269].State != githubv1.CheckState_CHECK_STATE_FAILURE {
		t.Fatalf("checks = %d, state %v, first %v, last %v", len(got.Checks), got.State, got.Checks[0], got.Checks[len(got.Checks)-1])
	}
	if n := len(f.requests("GET", "/check-runs")); n != 2 {
		t.Errorf("check-runs requests = %d, want 2", n)
	}
	if q := f.requests("GET", sha+"/status"); len(q) != 2 || !strings.Contains(q[1].Query, "page=2") {
		t.Errorf("status requests = %v, want pages 1 and 2", q)
	}
}

func TestPullRequestChecksErrors(t *testing.T) {
	t.Parallel()
	t.Run("unknown pull request", func(t *testing.T) {
		t.Parallel()
		f, p, _ := checksPR(t)
		_, err := p.PullRequestChecks(t.Context(), "octo/app", 99, forge.Actor{})
		wantErr(t, err, errs.ErrNotFound)
		if len(f.requests("GET", "/commits/")) != 0 {
			t.Error("checks read for a pull request that does not exist")
		}
	})
	t.Run("rate limited", func(t *testing.T) {
		t.Parallel()
		f, p, _ := checksPR(t)
		rateLimited(f, "/check-runs", 100, func(w http.ResponseWriter) {
			w.Header().Set("X-RateLimit-Remaining", "0")
			w.Header().Set("X-RateLimit-Reset", fmt.Sprint(time.Now().Add(time.Hour).Unix()))
			writeJSON(w, 403, msg("API rate limit exceeded for user ID 1."))
		})
		_, err := p.PullRequestChecks(t.Context(), "octo/app", 1, forge.Actor{})
		wantErr(t, err, errs.ErrUnavailable)
		wantPublic(t, err, "user ID")
	})
	t.Run("statuses unavailable", func(t *testing.T) {
		t.Parallel()
		f, p, _ := checksPR(t)
		f.SetHook(func(w http.ResponseWriter, r *http.Request) bool {
			if !strings.HasSuffix(r.URL.Path, "/status") {
				return false
			}
			writeJSON(w, 502, msg("Server Error at 10.0.0.7"))
			return true
		})
		_, err := p.PullRequestChecks(t.Context(), "octo/app", 1, forge.Actor{})
		wantErr(t, err, errs.ErrUnavailable)
		wantPublic(t, err, "10.0.0.7")
	})
}
