package hub

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The pull request and issue endpoints of the fake GitHub (see fakeGH). Issues and pull
// requests share one number sequence, as on GitHub.

// --- pull requests ---

func (f *fakeGH) routePulls(w http.ResponseWriter, r *http.Request, repo *fRepo, seg []string, body []byte) {
	if len(seg) == 0 {
		switch r.Method {
		case http.MethodPost:
			f.createPull(w, repo, body)
		case http.MethodGet:
			q := r.URL.Query()
			var list []*fIssue
			for _, is := range repo.issues {
				pr := is.pull
				if pr == nil {
					continue
				}
				if st := q.Get("state"); st != "" && st != "all" && st != is.state {
					continue
				}
				if h := q.Get("head"); h != "" && h != repo.owner+":"+pr.head {
					continue
				}
				if b := q.Get("base"); b != "" && b != pr.base {
					continue
				}
				list = append(list, is)
			}
			slices.SortFunc(list, func(a, b *fIssue) int { return b.number - a.number })
			lo, hi := paginate(w, r, len(list))
			out := []any{}
			for _, is := range list[lo:hi] {
				out = append(out, f.pullJSON(repo, is, false))
			}
			writeJSON(w, 200, out)
		}
		return
	}
	n, _ := strconv.Atoi(seg[0])
	is := repo.issues[n]
	if is == nil || is.pull == nil {
		writeJSON(w, 404, msg("Not Found"))
		return
	}
	switch {
	case len(seg) == 1 && r.Method == http.MethodGet:
		f.settle(repo, is)
		writeJSON(w, 200, f.pullJSON(repo, is, true))
	case len(seg) == 1 && r.Method == http.MethodPatch:
		var in struct {
			State *string `json:"state"`
		}
		_ = json.Unmarshal(body, &in)
		if in.State != nil && *in.State == "closed" && is.state == "open" {
			is.pull.headSHA = f.headOf(repo, is)
			is.state = "closed"
			now := time.Now().UTC()
			is.closed = &now
		}
		writeJSON(w, 200, f.pullJSON(repo, is, true))
	case len(seg) == 2 && seg[1] == "files" && r.Method == http.MethodGet:
		g := repo.git
		files := g.diffTrees(g.commits[f.prBase(repo, is)].tree, g.commits[f.headOf(repo, is)].tree)
		lo, hi := paginate(w, r, len(files))
		writeJSON(w, 200, files[lo:hi])
	case len(seg) == 2 && seg[1] == "merge" && r.Method == http.MethodPut:
		f.mergePull(w, repo, is, body)
	case len(seg) == 2 && seg[1] == "update-branch" && r.Method == http.MethodPut:
		f.updateBranch(w, repo, is, body)
	default:
		writeJSON(w, 404, msg("Not Found"))
	}
}

// headOf is a pull request's head: its branch while open, the last head once closed.
func (f *fakeGH) headOf(repo *fRepo, is *fIssue) string {
	if is.state == "open" {
		if sha := repo.refs["refs/heads/"+is.pull.head]; sha != "" {
			return sha
		}
	}
	return is.pull.headSHA
}

func (f *fakeGH) prBase(repo *fRepo, is *fIssue) string {
	return repo.git.mergeBase(repo.refs["refs/heads/"+is.pull.base], f.headOf(repo, is))
}

func (f *fakeGH) createPull(w http.ResponseWriter, repo *fRepo, body []byte) {
	var in struct {
		Title, Head, Base, Body string
		Draft                   bool
	}
	_ = json.Unmarshal(body, &in)
	head, base := repo.refs["refs/heads/"+in.Head], repo.refs["refs/heads/"+in.Base]
	switch {
	case head == "":
		writeJSON(w, 422, validation(map[string]any{"resource": "PullRequest", "field": "head", "code": "invalid"}))
		return
	case base == "":
		writeJSON(w, 422, validation(map[string]any{"resource": "PullRequest", "field": "base", "code": "invalid"}))
		return
	case repo.git.ancestors(base)[head]:
		writeJSON(w, 422, validation(map[string]any{"resource": "PullRequest", "code": "custom", "message": "No commits between " + in.Base + " and " + in.Head}))
		return
	}
	for _, is := range repo.issues {
		if is.pull != nil && is.state == "open" && is.pull.head == in.Head && is.pull.base == in.Base {
			writeJSON(w, 422, validation(map[string]any{"resource": "PullRequest", "code": "custom", "message": "A pull request already exists for " + repo.owner + ":" + in.Head + "."}))
			return
		}
	}
	is := f.newIssue(repo, in.Title, in.Body, nil)
	is.pull = &fPull{head: in.Head, base: in.Base, headSHA: head, draft: in.Draft}
	writeJSON(w, 201, f.pullJSON(repo, is, true))
}

func (f *fakeGH) mergeable(repo *fRepo, is *fIssue) (map[string]fEntry, bool) {
	g := repo.git
	base, head := repo.refs["refs/heads/"+is.pull.base], f.headOf(repo, is)
	mb := g.mergeBase(base, head)
	merged, ok := merge3(g.flatten(g.commits[mb].tree), g.flatten(g.commits[base].tree), g.flatten(g.commits[head].tree))
	if is.pull.mergeable != nil {
		ok = *is.pull.mergeable
	}
	return merged, ok
}

func (f *fakeGH) mergePull(w http.ResponseWriter, repo *fRepo, is *fIssue, body []byte) {
	var in struct {
		CommitTitle   string  `json:"commit_title"`
		CommitMessage *string `json:"commit_message"`
		SHA           string  `json:"sha"`
		MergeMethod   string  `json:"merge_method"`
	}
	_ = json.Unmarshal(body, &in)
	head := f.headOf(repo, is)
	if is.state != "open" {
		writeJSON(w, 405, msg("Pull Request is not mergeable"))
		return
	}
	if in.SHA != "" && in.SHA != head {
		writeJSON(w, 409, msg("Head branch was modified. Review and try the merge again."))
		return
	}
	flat, ok := f.mergeable(repo, is)
	if !ok {
		writeJSON(w, 405, msg("Pull Request is not mergeable"))
		return
	}
	g := repo.git
	base := repo.refs["refs/heads/"+is.pull.base]
	parents := []string{base}
	if in.MergeMethod == "merge" {
		parents = append(parents, head)
	}
	message := in.CommitTitle
	if in.CommitMessage != nil && *in.CommitMessage != "" {
		message += "\n\n" + *in.CommitMessage
	}
	sha := g.putCommit(g.build(flat), parents, message, fSig{f.login, ""})
	repo.refs["refs/heads/"+is.pull.base] = sha
	now := time.Now().UTC()
	is.pull.headSHA, is.pull.merged, is.pull.mergedAt, is.pull.mergeSHA = head, true, &now, sha
	is.state, is.closed = "closed", &now
	writeJSON(w, 200, map[string]any{"sha": sha, "merged": true, "message": "Pull Request successfully merged"})
}

func (f *fakeGH) pullJSON(repo *fRepo, is *fIssue, full bool) map[string]any {
	pr := is.pull
	full_ := repo.owner + "/" + repo.name
	head := f.headOf(repo, is)
	m := f.issueBase(repo, is)
	m["head"] = map[string]any{"ref": pr.head, "sha": head, "repo": map[string]any{"full_name": full_}}
	m["base"] = map[string]any{"ref": pr.base, "sha": repo.refs["refs/heads/"+pr.base], "repo": map[string]any{"full_name": full_}}
	m["draft"] = pr.draft
	m["html_url"] = fmt.Sprintf("https://github.example/%s/pull/%d", full_, is.number)
	if pr.merged {
		m["merged_at"] = pr.mergedAt.Format(time.RFC3339)
		m["merge_commit_sha"] = pr.mergeSHA
	} else {
		m["merge_commit_sha"] = "0000000000000000000000000000000000000001" // a test merge
	}
	if full {
		m["merged"] = pr.merged
		if is.state == "open" {
			_, ok := f.mergeable(repo, is)
			m["mergeable"] = ok
		}
		g := repo.git
		files := g.diffTrees(g.commits[f.prBase(repo, is)].tree, g.commits[head].tree)
		add, del := 0, 0
		for _, fd := range files {
			add += fd.Additions
			del += fd.Deletions
		}
		m["additions"], m["deletions"], m["changed_files"] = add, del, len(files)
	}
	return m
}

// --- issues ---

func (f *fakeGH) newIssue(repo *fRepo, title, body string, labels []string) *fIssue {
	now := fakeEpoch.Add(time.Duration(repo.nextNum) * time.Hour)
	is := &fIssue{number: repo.nextNum, id: 90000 + int64(repo.nextNum), title: title, body: body, state: "open", labels: labels, user: f.login, created: now, updated: now}
	repo.issues[is.number] = is
	repo.nextNum++
	return is
}

func (f *fakeGH) issueBase(repo *fRepo, is *fIssue) map[string]any {
	labels := []any{}
	for _, l := range is.labels {
		labels = append(labels, map[string]any{"name": l})
	}
	m := map[string]any{
		"id": is.id, "number": is.number, "title": is.title, "body": is.body, "state": is.state,
		"labels": labels, "user": map[string]any{"login": is.user}, "comments": is.comments,
		"created_at": is.created.Format(time.RFC3339), "updated_at": is.updated.Format(time.RFC3339),
		"html_url": fmt.Sprintf("https://github.example/%s/%s/issues/%d", repo.owner, repo.name, is.number),
	}
	if is.closed != nil {
		m["closed_at"] = is.closed.Format(time.RFC3339)
	}
	return m
}

func (f *fakeGH) issueJSON(repo *fRepo, is *fIssue) map[string]any {
	m := f.issueBase(repo, is)
	if is.pull != nil {
		m["pull_request"] = map[string]any{"url": fmt.Sprintf("https://api.github.example/repos/%s/%s/pulls/%d", repo.owner, repo.name, is.number)}
	}
	if !f.noSumm && !f.depsOff {
		m["issue_dependencies_summary"] = map[string]any{"blocked_by": len(repo.deps[is.number]), "blocking": 0}
	}
	return m
}

func (f *fakeGH) routeIssues(w http.ResponseWriter, r *http.Request, repo *fRepo, seg []string, body []byte) {
	if len(seg) == 0 {
		switch r.Method {
		case http.MethodGet:
			q := r.URL.Query()
			var list []*fIssue
			for _, is := range repo.issues {
				if st := q.Get("state"); st != "" && st != "all" && st != is.state {
					continue
				}
				if ls := q.Get("labels"); ls != "" {
					all := true
					for _, l := range strings.Split(ls, ",") {
						all = all && slices.Contains(is.labels, l)
					}
					if !all {
						continue
					}
				}
				list = append(list, is)
			}
			slices.SortFunc(list, func(a, b *fIssue) int { return b.number - a.number })
			lo, hi := paginate(w, r, len(list))
			out := []any{}
			for _, is := range list[lo:hi] {
				out = append(out, f.issueJSON(repo, is))
			}
			writeJSON(w, 200, out)
		case http.MethodPost:
			var in struct {
				Title, Body string
				Labels      []string
			}
			_ = json.Unmarshal(body, &in)
			is := f.newIssue(repo, in.Title, in.Body, in.Labels)
			writeJSON(w, 201, f.issueJSON(repo, is))
		}
		return
	}
	n, _ := strconv.Atoi(seg[0])
	is := repo.issues[n]
	if is == nil {
		writeJSON(w, 404, msg("Not Found"))
		return
	}
	switch {
	case len(seg) == 1 && r.Method == http.MethodGet:
		writeJSON(w, 200, f.issueJSON(repo, is))
	case len(seg) == 1 && r.Method == http.MethodPatch:
		var in struct {
			Title, Body, State *string
			Labels             *[]string
		}
		_ = json.Unmarshal(body, &in)
		if in.Title != nil {
			is.title = *in.Title
		}
		if in.Body != nil {
			is.body = *in.Body
		}
		if in.Labels != nil {
			is.labels = *in.Labels
		}
		if in.State != nil && *in.State != is.state {
			if is.pull != nil && is.state == "open" {
				is.pull.headSHA = f.headOf(repo, is)
			}
			is.state = *in.State
			is.closed = nil
			if is.state == "closed" {
				now := time.Now().UTC()
				is.closed = &now
			}
		}
		is.updated = is.updated.Add(time.Minute)
		writeJSON(w, 200, f.issueJSON(repo, is))
	case len(seg) == 2 && seg[1] == "labels" && r.Method == http.MethodPost:
		var labels []string
		if json.Unmarshal(body, &labels) != nil {
			var in struct{ Labels []string }
			_ = json.Unmarshal(body, &in)
			labels = in.Labels
		}
		for _, l := range labels {
			if !slices.Contains(is.labels, l) {
				is.labels = append(is.labels, l)
			}
		}
		out := []any{}
		for _, l := range is.labels {
			out = append(out, map[string]any{"name": l})
		}
		writeJSON(w, 200, out)
	case len(seg) == 2 && seg[1] == "comments" && r.Method == http.MethodPost:
		var in struct{ Body string }
		_ = json.Unmarshal(body, &in)
		repo.nextComment++
		is.comments++
		c := map[string]any{
			"id": repo.nextComment, "body": in.Body, "user": map[string]any{"login": f.login},
			"html_url":   fmt.Sprintf("https://github.example/%s/%s/issues/%d#issuecomment-%d", repo.owner, repo.name, n, repo.nextComment),
			"created_at": fakeEpoch.Format(time.RFC3339),
		}
		is.commentList = append(is.commentList, c)
		writeJSON(w, 201, c)
	case len(seg) == 2 && seg[1] == "comments" && r.Method == http.MethodGet:
		lo, hi := paginate(w, r, len(is.commentList))
		writeJSON(w, 200, append([]map[string]any{}, is.commentList[lo:hi]...))
	case len(seg) >= 3 && seg[1] == "dependencies" && seg[2] == "blocked_by":
		f.routeDeps(w, r, repo, is, seg[3:], body)
	default:
		writeJSON(w, 404, msg("Not Found"))
	}
}

func (f *fakeGH) routeDeps(w http.ResponseWriter, r *http.Request, repo *fRepo, is *fIssue, seg []string, body []byte) {
	if f.depsOff {
		writeJSON(w, 404, msg("Not Found"))
		return
	}
	byID := func(id int64) *fIssue {
		for _, x := range repo.issues {
			if x.id == id {
				return x
			}
		}
		return nil
	}
	switch {
	case len(seg) == 0 && r.Method == http.MethodGet:
		out := []any{}
		for _, b := range repo.deps[is.number] {
			out = append(out, f.issueJSON(repo, repo.issues[b]))
		}
		writeJSON(w, 200, out)
	case len(seg) == 0 && r.Method == http.MethodPost:
		var in struct {
			IssueID int64 `json:"issue_id"`
		}
		_ = json.Unmarshal(body, &in)
		b := byID(in.IssueID)
		switch {
		case b == nil:
			writeJSON(w, 404, msg("Not Found"))
		case slices.Contains(repo.deps[is.number], b.number):
			writeJSON(w, 422, msg("Dependency already exists"))
		default:
			repo.deps[is.number] = append(repo.deps[is.number], b.number)
			writeJSON(w, 201, f.issueJSON(repo, b))
		}
	case len(seg) == 1 && r.Method == http.MethodDelete:
		id, _ := strconv.ParseInt(seg[0], 10, 64)
		b := byID(id)
		if b == nil || !slices.Contains(repo.deps[is.number], b.number) {
			writeJSON(w, 404, msg("Not Found"))
			return
		}
		repo.deps[is.number] = slices.DeleteFunc(repo.deps[is.number], func(x int) bool { return x == b.number })
		writeJSON(w, 200, f.issueJSON(repo, b))
	default:
		writeJSON(w, 404, msg("Not Found"))
	}
}
