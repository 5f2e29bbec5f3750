package fakegithub

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The checks endpoints of the fake: a commit's check runs and its combined status, in the
// shapes of GitHub's REST API.

// CheckRun is a check run of a commit; Conclusion is "" until Status is "completed".
type CheckRun struct {
	Name string
	// Status is queued, in_progress or completed.
	Status string
	// Conclusion is success, failure, neutral, cancelled, skipped, timed_out,
	// action_required or stale.
	Conclusion string
	// Title is output.title (TheFold's check summary).
	Title string
	// DetailsURL is "" for none (GitHub then links html_url).
	DetailsURL string
}

// Status is a commit status.
type Status struct {
	Context string
	// State is pending, success, failure or error.
	State       string
	Description string
	TargetURL   string
}

// CheckTarget is what a ChecksRule is told of a commit.
type CheckTarget struct {
	Repo, SHA string
	// Branches are the branches pointing at the commit when its checks are read.
	Branches []string
	// Files maps the commit's paths to their content.
	Files map[string]string
}

// ChecksRule decides the checks of a commit, as a CI would: asked once per commit, the
// first time its checks are read; what it returns is added to the check runs and statuses
// recorded for the commit (AddCheckRun, AddStatus). It runs under the server's lock and
// must not call the server.
type ChecksRule func(c CheckTarget) ([]CheckRun, []Status)

// SetChecksRule installs rule (nil removes it) for commits not asked about yet.
func (s *Server) SetChecksRule(rule ChecksRule) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rule = rule
}

// AddCheckRun records a check run on commit sha.
func (s *Server) AddCheckRun(full, sha string, c CheckRun) {
	s.with(full, func(r *repo) { r.checkRuns[sha] = append(r.checkRuns[sha], c) })
}

// AddStatus records a commit status on sha; one with the same context replaces it, as the
// combined status shows only the latest per context.
func (s *Server) AddStatus(full, sha string, st Status) {
	s.with(full, func(r *repo) { r.addStatus(sha, st) })
}

func (r *repo) addStatus(sha string, st Status) {
	list := r.statuses[sha]
	for i, x := range list {
		if x.Context == st.Context {
			list[i] = st
			return
		}
	}
	r.statuses[sha] = append(list, st)
}

// CheckRuns and Statuses are what a commit has (the rule's answer included, once asked).
func (s *Server) CheckRuns(full, sha string) []CheckRun {
	var out []CheckRun
	s.with(full, func(r *repo) { out = slices.Clone(r.checkRuns[sha]) })
	return out
}

// Statuses: see CheckRuns.
func (s *Server) Statuses(full, sha string) []Status {
	var out []Status
	s.with(full, func(r *repo) { out = slices.Clone(r.statuses[sha]) })
	return out
}

// applyRule asks the checks rule about commit sha once.
func (s *Server) applyRule(rp *repo, sha string) {
	if s.rule == nil || rp.ruled[sha] {
		return
	}
	rp.ruled[sha] = true
	t := CheckTarget{Repo: rp.owner + "/" + rp.name, SHA: sha, Files: map[string]string{}}
	for ref, x := range rp.refs {
		if b, ok := strings.CutPrefix(ref, "refs/heads/"); ok && x == sha {
			t.Branches = append(t.Branches, b)
		}
	}
	slices.Sort(t.Branches)
	for p, f := range rp.files(sha) {
		t.Files[p] = f.Content
	}
	runs, statuses := s.rule(t)
	rp.checkRuns[sha] = append(rp.checkRuns[sha], runs...)
	for _, st := range statuses {
		rp.addStatus(sha, st)
	}
}

// getChecks answers GET /repos/{o}/{r}/commits/{ref}/check-runs and …/status.
func (s *Server) getChecks(w http.ResponseWriter, r *http.Request, rp *repo, ref, kind string) {
	if len(rp.refs) == 0 {
		writeJSON(w, 409, msg("Git Repository is empty."))
		return
	}
	sha := rp.resolve(ref)
	if sha == "" {
		writeJSON(w, 422, msg("No commit found for SHA: "+ref))
		return
	}
	s.applyRule(rp, sha)
	html := "https://github.example/" + rp.owner + "/" + rp.name
	stamp := epoch.Format(time.RFC3339)
	if kind == "check-runs" {
		runs := rp.checkRuns[sha]
		lo, hi := paginate(w, r, len(runs))
		out := []any{}
		for i, c := range runs[lo:hi] {
			id := int64(7000 + lo + i)
			run := map[string]any{
				"id": id, "head_sha": sha, "name": c.Name, "status": c.Status, "conclusion": nil,
				"html_url": html + "/runs/" + strconv.FormatInt(id, 10), "details_url": nil, "started_at": stamp,
				"output": map[string]any{"title": nil, "summary": nil, "annotations_count": 0},
			}
			if c.Conclusion != "" {
				run["conclusion"], run["completed_at"] = c.Conclusion, stamp
			}
			if c.DetailsURL != "" {
				run["details_url"] = c.DetailsURL
			}
			if c.Title != "" {
				run["output"].(map[string]any)["title"] = c.Title
			}
			out = append(out, run)
		}
		writeJSON(w, 200, map[string]any{"total_count": len(runs), "check_runs": out})
		return
	}
	statuses := rp.statuses[sha]
	// GitHub's combined state: failure if any failed or errored, pending if any is pending
	// (or there are none), else success.
	state := "success"
	if len(statuses) == 0 {
		state = "pending"
	}
	for _, st := range statuses {
		switch {
		case st.State == "failure" || st.State == "error":
			state = "failure"
		case st.State == "pending" && state != "failure":
			state = "pending"
		}
	}
	lo, hi := paginate(w, r, len(statuses))
	out := []any{}
	for i, st := range statuses[lo:hi] {
		out = append(out, map[string]any{
			"id": 9000 + lo + i, "state": st.State, "context": st.Context, "description": st.Description,
			"target_url": st.TargetURL, "created_at": stamp, "updated_at": stamp,
		})
	}
	writeJSON(w, 200, map[string]any{
		"state": state, "sha": sha, "total_count": len(statuses), "statuses": out,
		"commit_url": "https://api.github.example/repos/" + rp.owner + "/" + rp.name + "/commits/" + sha,
		"repository": map[string]any{"id": rp.id, "full_name": rp.owner + "/" + rp.name},
	})
}
