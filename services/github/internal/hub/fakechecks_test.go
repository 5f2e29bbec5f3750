package hub

import (
	"net/http"
	"strconv"
	"time"
)

// The checks endpoints of the fake GitHub (see fakeGH): a commit's check runs and its
// combined status, in the shapes of GitHub's REST API.

// fCheckRun is a check run; conclusion is "" until status is "completed".
type fCheckRun struct {
	name, status, conclusion string
	title                    string // output.title
	detailsURL               string // "" = none (GitHub then links html_url)
}

// fStatus is a commit status: pending, success, failure or error.
type fStatus struct {
	context, state, description, targetURL string
}

// addCheckRun records a check run on commit sha of repo full.
func (f *fakeGH) addCheckRun(full, sha string, c fCheckRun) {
	f.with(func() {
		r := f.repos[full]
		if r.checkRuns == nil {
			r.checkRuns = map[string][]fCheckRun{}
		}
		r.checkRuns[sha] = append(r.checkRuns[sha], c)
	})
}

// addStatus records a commit status; one with the same context replaces it, as the
// combined status shows only the latest per context.
func (f *fakeGH) addStatus(full, sha string, s fStatus) {
	f.with(func() {
		r := f.repos[full]
		if r.statuses == nil {
			r.statuses = map[string][]fStatus{}
		}
		list := r.statuses[sha]
		for i, x := range list {
			if x.context == s.context {
				list[i] = s
				return
			}
		}
		r.statuses[sha] = append(list, s)
	})
}

// getChecks answers GET /repos/{o}/{r}/commits/{ref}/check-runs and …/status.
func (f *fakeGH) getChecks(w http.ResponseWriter, r *http.Request, repo *fRepo, ref, kind string) {
	if len(repo.refs) == 0 {
		writeJSON(w, 409, msg("Git Repository is empty."))
		return
	}
	sha := repo.resolve(ref)
	if sha == "" {
		writeJSON(w, 422, msg("No commit found for SHA: "+ref))
		return
	}
	html := "https://github.example/" + repo.owner + "/" + repo.name
	stamp := fakeEpoch.Format(time.RFC3339)
	if kind == "check-runs" {
		runs := repo.checkRuns[sha]
		lo, hi := paginate(w, r, len(runs))
		out := []any{}
		for i, c := range runs[lo:hi] {
			id := int64(7000 + lo + i)
			run := map[string]any{
				"id": id, "head_sha": sha, "name": c.name, "status": c.status, "conclusion": nil,
				"html_url": html + "/runs/" + strconv.FormatInt(id, 10), "details_url": nil, "started_at": stamp,
				"output": map[string]any{"title": nil, "summary": nil, "annotations_count": 0},
			}
			if c.conclusion != "" {
				run["conclusion"], run["completed_at"] = c.conclusion, stamp
			}
			if c.detailsURL != "" {
				run["details_url"] = c.detailsURL
			}
			if c.title != "" {
				run["output"].(map[string]any)["title"] = c.title
			}
			out = append(out, run)
		}
		writeJSON(w, 200, map[string]any{"total_count": len(runs), "check_runs": out})
		return
	}
	statuses := repo.statuses[sha]
	// GitHub's combined state: failure if any failed or errored, pending if any is pending
	// (or there are none), else success.
	state := "success"
	if len(statuses) == 0 {
		state = "pending"
	}
	for _, s := range statuses {
		switch {
		case s.state == "failure" || s.state == "error":
			state = "failure"
		case s.state == "pending" && state != "failure":
			state = "pending"
		}
	}
	lo, hi := paginate(w, r, len(statuses))
	out := []any{}
	for i, s := range statuses[lo:hi] {
		out = append(out, map[string]any{
			"id": 9000 + lo + i, "state": s.state, "context": s.context, "description": s.description,
			"target_url": s.targetURL, "created_at": stamp, "updated_at": stamp,
		})
	}
	writeJSON(w, 200, map[string]any{
		"state": state, "sha": sha, "total_count": len(statuses), "statuses": out,
		"commit_url": "https://api.github.example/repos/" + repo.owner + "/" + repo.name + "/commits/" + sha,
		"repository": map[string]any{"id": repo.id, "full_name": repo.owner + "/" + repo.name},
	})
}
