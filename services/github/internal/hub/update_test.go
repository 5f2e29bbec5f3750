package hub

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/thefold/thefold/pkg/errs"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	"github.com/thefold/thefold/services/github/internal/forge"
)

// behindPR is prRepo with pull request #1 from feature to main, and main moved on by a
// commit that touches another file than feature does (baseFiles, when given, replace it).
func behindPR(t *testing.T, baseFiles map[string]string) (*fakeGH, *Provider, *githubv1.PullRequest) {
	t.Helper()
	f, p := prRepo(t)
	p.updatePoll = 5 * time.Millisecond
	pr := try(createPR(t, p)).must(t)
	if baseFiles == nil {
		baseFiles = map[string]string{"later.txt": "later\n"}
	}
	f.Commit("octo/app", "main", baseFiles)
	return f, p, pr
}

// createPR opens pull request #1 of prRepo, from feature to main.
func createPR(t *testing.T, p *Provider) (*githubv1.PullRequest, error) {
	pr, _, err := p.CreatePullRequest(t.Context(), forge.NewPullRequest{Repo: "octo/app", Head: "feature", Base: "main", Title: "Feature"})
	return pr, err
}

// The base moved: the update sends the head it read as expected_head_sha, waits out
// GitHub's background merge by reading the pull request again, and answers with the new
// head, a merge of base into head. Up to date, nothing is sent.
func TestMergeBaseIntoPullRequest(t *testing.T) {
	t.Parallel()
	f, p := prRepo(t)
	p.updatePoll = 5 * time.Millisecond
	pr := try(createPR(t, p)).must(t)

	// Up to date: compared, not updated.
	same, updated, err := p.MergeBaseIntoPullRequest(t.Context(), "octo/app", pr.Number, "", forge.Actor{})
	if err != nil || updated || same.HeadSha != pr.HeadSha {
		t.Fatalf("up to date = %v %v %v", same, updated, err)
	}
	if n := len(f.requests("PUT", "/update-branch")); n != 0 {
		t.Fatalf("%d update requests for a head that has the base", n)
	}
	if q := f.requests("GET", "/compare/main..."+pr.HeadSha); len(q) != 1 {
		t.Errorf("comparison of the base branch with the head = %v", q)
	}

	base := f.Commit("octo/app", "main", map[string]string{"later.txt": "later\n"})
	f.SetUpdateLag(2)
	reads := len(f.requests("GET", "/pulls/1"))
	got, updated, err := p.MergeBaseIntoPullRequest(t.Context(), "octo/app", pr.Number, pr.HeadSha, forge.Actor{})
	if err != nil || !updated {
		t.Fatalf("update = %v %v %v", got, updated, err)
	}
	head := f.Branch("octo/app", "feature")
	if got.HeadSha != head || head == pr.HeadSha || got.State != githubv1.PullRequestState_PULL_REQUEST_STATE_OPEN {
		t.Errorf("updated pull request = %v, want head %s", got, head)
	}
	c, _ := f.CommitInfo("octo/app", head)
	if !slices.Equal(c.Parents, []string{pr.HeadSha, base}) || c.Message != "Merge branch 'main' into feature" {
		t.Errorf("merge commit = %+v", c)
	}
	put := f.requests("PUT", "/repos/octo/app/pulls/1/update-branch")
	if len(put) != 1 {
		t.Fatalf("update requests = %v", put)
	}
	var body map[string]any
	if err := json.Unmarshal(put[0].Body, &body); err != nil || body["expected_head_sha"] != pr.HeadSha {
		t.Errorf("update request body = %s", put[0].Body)
	}
	// One read before, then the lag's two reads that still show the old head, then the new one.
	if n := len(f.requests("GET", "/pulls/1")) - reads; n != 4 {
		t.Errorf("pull request reads = %d, want 4", n)
	}

	// Now up to date: no second update.
	again, updated, err := p.MergeBaseIntoPullRequest(t.Context(), "octo/app", pr.Number, head, forge.Actor{})
	if err != nil || updated || again.HeadSha != head {
		t.Errorf("second update = %v %v %v", again, updated, err)
	}
	if n := len(f.requests("PUT", "/update-branch")); n != 1 {
		t.Errorf("update requests = %d, want 1", n)
	}
}

func TestMergeBaseIntoPullRequestRefusals(t *testing.T) {
	t.Parallel()
	t.Run("expected head", func(t *testing.T) {
		t.Parallel()
		f, p, _ := behindPR(t, nil)
		_, _, err := p.MergeBaseIntoPullRequest(t.Context(), "octo/app", 1, strings.Repeat("2", 40), forge.Actor{})
		wantErr(t, err, errs.ErrConflict)
		if n := len(f.requests("PUT", "/update-branch")); n != 0 {
			t.Errorf("update sent for a head other than the expected one")
		}
	})
	t.Run("conflict", func(t *testing.T) {
		t.Parallel()
		f, p, pr := behindPR(t, map[string]string{"src/main.go": "package main\n\nfunc main() { other() }\n"})
		_, _, err := p.MergeBaseIntoPullRequest(t.Context(), "octo/app", 1, "", forge.Actor{})
		wantErr(t, err, errs.ErrFailedPrecondition)
		wantPublic(t, err, "merge conflict between")
		if f.Branch("octo/app", "feature") != pr.HeadSha {
			t.Error("the head moved")
		}
	})
	t.Run("closed", func(t *testing.T) {
		t.Parallel()
		f, p, _ := behindPR(t, nil)
		try(p.ClosePullRequest(t.Context(), "octo/app", 1, false, forge.Actor{})).must(t)
		_, _, err := p.MergeBaseIntoPullRequest(t.Context(), "octo/app", 1, "", forge.Actor{})
		wantErr(t, err, errs.ErrFailedPrecondition)
		if n := len(f.requests("PUT", "/update-branch")); n != 0 {
			t.Errorf("update sent for a closed pull request")
		}
	})
	t.Run("merged", func(t *testing.T) {
		t.Parallel()
		_, p, _ := behindPR(t, nil)
		try(p.MergePullRequest(t.Context(), forge.MergeSpec{Repo: "octo/app", Number: 1})).must(t)
		_, _, err := p.MergeBaseIntoPullRequest(t.Context(), "octo/app", 1, "", forge.Actor{})
		wantErr(t, err, errs.ErrFailedPrecondition)
	})
	t.Run("unknown", func(t *testing.T) {
		t.Parallel()
		_, p, _ := behindPR(t, nil)
		_, _, err := p.MergeBaseIntoPullRequest(t.Context(), "octo/app", 42, "", forge.Actor{})
		wantErr(t, err, errs.ErrNotFound)
	})
	t.Run("head never moves", func(t *testing.T) {
		t.Parallel()
		f, p, _ := behindPR(t, nil)
		f.SetUpdateLag(1 << 20)
		p.updateWait = 100 * time.Millisecond
		start := time.Now()
		_, _, err := p.MergeBaseIntoPullRequest(t.Context(), "octo/app", 1, "", forge.Actor{})
		wantErr(t, err, errs.ErrUnavailable)
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("waited %s for a bound of %s", took, p.updateWait)
		}
	})
	t.Run("comparison fails", func(t *testing.T) {
		t.Parallel()
		f, p, pr := behindPR(t, nil)
		f.SetHook(func(w http.ResponseWriter, r *http.Request) bool {
			if !strings.Contains(r.URL.Path, "/compare/") {
				return false
			}
			writeJSON(w, 502, msg("Server Error"))
			return true
		})
		got, updated, err := p.MergeBaseIntoPullRequest(t.Context(), "octo/app", 1, "", forge.Actor{})
		if err != nil || !updated || got.HeadSha == pr.HeadSha {
			t.Errorf("update without a comparison = %v %v %v", got, updated, err)
		}
	})
}

// GitHub's answers to the update call itself: 422s told apart by their message, rate
// limits (a write is not retried) and the rest through mapErr.
func TestMergeBaseIntoPullRequestAnswers(t *testing.T) {
	t.Parallel()
	unprocessable := func(m string) func(w http.ResponseWriter) {
		return func(w http.ResponseWriter) { writeJSON(w, 422, msg(m)) }
	}
	cases := []struct {
		name    string
		answer  func(w http.ResponseWriter)
		want    error // nil: answered, not updated
		private string
	}{
		{"head moved", unprocessable("expected head sha didn't match current head ref."), errs.ErrConflict, "head ref"},
		{"conflict", unprocessable("merge conflict between base and head"), errs.ErrFailedPrecondition, "merge conflict"},
		{"up to date meanwhile", unprocessable("There are no new commits on the base branch."), nil, ""},
		{"other 422", unprocessable("Validation Failed at 10.0.0.7"), errs.ErrFailedPrecondition, "10.0.0.7"},
		{"rate limit", func(w http.ResponseWriter) {
			w.Header().Set("X-RateLimit-Remaining", "0")
			w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10))
			writeJSON(w, 403, msg("API rate limit exceeded for user ID 1."))
		}, errs.ErrUnavailable, "user ID"},
		{"secondary rate limit", func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "1")
			writeJSON(w, 403, map[string]any{"message": "You have exceeded a secondary rate limit.",
				"documentation_url": "https://docs.github.com/rest#secondary-rate-limits"})
		}, errs.ErrUnavailable, "exceeded"},
		{"forbidden", func(w http.ResponseWriter) { writeJSON(w, 403, msg("Resource not accessible by integration")) }, errs.ErrNotFound, "integration"},
		{"unavailable", func(w http.ResponseWriter) { writeJSON(w, 503, msg("Server Error at 10.0.0.7")) }, errs.ErrUnavailable, "10.0.0.7"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f, p, pr := behindPR(t, nil)
			count := rateLimited(f, "/update-branch", 100, c.answer)
			got, updated, err := p.MergeBaseIntoPullRequest(t.Context(), "octo/app", 1, "", forge.Actor{})
			if c.want == nil {
				if err != nil || updated || got.HeadSha != pr.HeadSha {
					t.Errorf("answer = %v %v %v, want the pull request as it is", got, updated, err)
				}
			} else {
				wantErr(t, err, c.want)
				wantPublic(t, err, c.private)
			}
			if count.get() != 1 {
				t.Errorf("update requests = %d, want 1 (a write is never retried)", count.get())
			}
			if f.Branch("octo/app", "feature") != pr.HeadSha {
				t.Error("the head moved")
			}
		})
	}
}

// Merge groups are the local forge's: on GitHub, CreateMergeGroup is UNIMPLEMENTED (so a
// crew falls back to checking each pull request alone), the client sees that code and not a
// masked internal error, and nothing is sent to GitHub.
func TestCreateMergeGroupIsUnimplemented(t *testing.T) {
	t.Parallel()
	f, p := prRepo(t)
	try(createPR(t, p)).must(t)
	sent := len(f.Requests())
	got, err := p.CreateMergeGroup(t.Context(), "octo/app", "main", []int32{1}, forge.Actor{})
	if got != nil || status.Code(err) != codes.Unimplemented {
		t.Fatalf("CreateMergeGroup = %v %v, want UNIMPLEMENTED", got, err)
	}
	if st := status.Convert(errs.ToStatus(t.Context(), slog.New(slog.DiscardHandler), "/thefold.github.v1.RepoService/CreateMergeGroup", err)); st.Code() != codes.Unimplemented ||
		!strings.Contains(st.Message(), "octo/app") || !strings.Contains(st.Message(), "local forge") {
		t.Fatalf("the client sees %v, want UNIMPLEMENTED naming the repository and the local forge", st)
	}
	if n := len(f.Requests()); n != sent {
		t.Fatalf("%d requests sent to GitHub for a merge group", n-sent)
	}
}
