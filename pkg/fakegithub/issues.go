package fakegithub

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The pull request and issue endpoints of the fake. Issues and pull requests share one
// number sequence, as on GitHub.

// --- pull requests ---

func (s *Server) routePulls(w http.ResponseWriter, r *http.Request, rp *repo, seg []string, body []byte) {
	if len(seg) == 0 {
		switch r.Method {
		case http.MethodPost:
			s.createPull(w, rp, body)
		case http.MethodGet:
			q := r.URL.Query()
			var list []*issue
			for _, is := range rp.issues {
				pr := is.pull
				if pr == nil {
					continue
				}
				if st := q.Get("state"); st != "" && st != "all" && st != is.state {
					continue
				}
				if h := q.Get("head"); h != "" && h != rp.owner+":"+pr.head {
					continue
				}
				if b := q.Get("base"); b != "" && b != pr.base {
					continue
				}
				list = append(list, is)
			}
			slices.SortFunc(list, func(a, b *issue) int { return b.number - a.number })
			lo, hi := paginate(w, r, len(list))
			out := []any{}
			for _, is := range list[lo:hi] {
				out = append(out, s.pullJSON(rp, is, false))
			}
			writeJSON(w, 200, out)
		}
		return
	}
	n, _ := strconv.Atoi(seg[0])
	is := rp.issues[n]
	if is == nil || is.pull == nil {
		writeJSON(w, 404, msg("Not Found"))
		return
	}
	switch {
	case len(seg) == 1 && r.Method == http.MethodGet:
		s.settle(rp, is)
		writeJSON(w, 200, s.pullJSON(rp, is, true))
	case len(seg) == 1 && r.Method == http.MethodPatch:
		var in struct {
			State *string `json:"state"`
		}
		_ = json.Unmarshal(body, &in)
		if in.State != nil && *in.State == "closed" && is.state == "open" {
			is.pull.headSHA = s.headOf(rp, is)
			is.state = "closed"
			now := time.Now().UTC()
			is.closed = &now
		}
		writeJSON(w, 200, s.pullJSON(rp, is, true))
	case len(seg) == 2 && seg[1] == "files" && r.Method == http.MethodGet:
		g := rp.git
		files := g.diffTrees(g.commits[s.prBase(rp, is)].tree, g.commits[s.headOf(rp, is)].tree)
		lo, hi := paginate(w, r, len(files))
		writeJSON(w, 200, files[lo:hi])
	case len(seg) == 2 && seg[1] == "merge" && r.Method == http.MethodPut:
		s.mergePull(w, rp, is, body)
	case len(seg) == 2 && seg[1] == "update-branch" && r.Method == http.MethodPut:
		s.updateBranch(w, rp, is, body)
	default:
		writeJSON(w, 404, msg("Not Found"))
	}
}

// headOf is a pull request's head: its branch while open, the last head once closed.
func (s *Server) headOf(rp *repo, is *issue) string {
	if is.state == "open" {
		if sha := rp.refs["refs/heads/"+is.pull.head]; sha != "" {
			return sha
		}
	}
	return is.pull.headSHA
}

func (s *Server) prBase(rp *repo, is *issue) string {
	return rp.git.mergeBase(rp.refs["refs/heads/"+is.pull.base], s.headOf(rp, is))
}

func (s *Server) createPull(w http.ResponseWriter, rp *repo, body []byte) {
	var in struct {
		Title, Head, Base, Body string
		Draft                   bool
	}
	_ = json.Unmarshal(body, &in)
	head, base := rp.refs["refs/heads/"+in.Head], rp.refs["refs/heads/"+in.Base]
	switch {
	case head == "":
		writeJSON(w, 422, validation(map[string]any{"resource": "PullRequest", "field": "head", "code": "invalid"}))
		return
	case base == "":
		writeJSON(w, 422, validation(map[string]any{"resource": "PullRequest", "field": "base", "code": "invalid"}))
		return
	case rp.git.ancestors(base)[head]:
		writeJSON(w, 422, validation(map[string]any{"resource": "PullRequest", "code": "custom", "message": "No commits between " + in.Base + " and " + in.Head}))
		return
	}
	for _, is := range rp.issues {
		if is.pull != nil && is.state == "open" && is.pull.head == in.Head && is.pull.base == in.Base {
			writeJSON(w, 422, validation(map[string]any{"resource": "PullRequest", "code": "custom", "message": "A pull request already exists for " + rp.owner + ":" + in.Head + "."}))
			return
		}
	}
	is := s.newIssue(rp, in.Title, in.Body, nil)
	is.pull = &pull{head: in.Head, base: in.Base, headSHA: head, draft: in.Draft}
	writeJSON(w, 201, s.pullJSON(rp, is, true))
}

func (s *Server) mergeable(rp *repo, is *issue) (map[string]entry, bool) {
	g := rp.git
	base, head := rp.refs["refs/heads/"+is.pull.base], s.headOf(rp, is)
	mb := g.mergeBase(base, head)
	merged, ok := merge3(g.flatten(g.commits[mb].tree), g.flatten(g.commits[base].tree), g.flatten(g.commits[head].tree))
	if is.pull.mergeable != nil {
		ok = *is.pull.mergeable
	}
	return merged, ok
}

func (s *Server) mergePull(w http.ResponseWriter, rp *repo, is *issue, body []byte) {
	var in struct {
		CommitTitle   string  `json:"commit_title"`
		CommitMessage *string `json:"commit_message"`
		SHA           string  `json:"sha"`
		MergeMethod   string  `json:"merge_method"`
	}
	_ = json.Unmarshal(body, &in)
	head := s.headOf(rp, is)
	if is.state != "open" {
		writeJSON(w, 405, msg("Pull Request is not mergeable"))
		return
	}
	if in.SHA != "" && in.SHA != head {
		writeJSON(w, 409, msg("Head branch was modified. Review and try the merge again."))
		return
	}
	flat, ok := s.mergeable(rp, is)
	if !ok {
		writeJSON(w, 405, msg("Pull Request is not mergeable"))
		return
	}
	g := rp.git
	base := rp.refs["refs/heads/"+is.pull.base]
	parents := []string{base}
	if in.MergeMethod == "merge" {
		parents = append(parents, head)
	}
	message := in.CommitTitle
	if in.CommitMessage != nil && *in.CommitMessage != "" {
		message += "\n\n" + *in.CommitMessage
	}
	sha := g.putCommit(g.build(flat), parents, message, sig{s.login, ""})
	rp.refs["refs/heads/"+is.pull.base] = sha
	now := time.Now().UTC()
	is.pull.headSHA, is.pull.merged, is.pull.mergedAt, is.pull.mergeSHA = head, true, &now, sha
	is.state, is.closed = "closed", &now
	writeJSON(w, 200, map[string]any{"sha": sha, "merged": true, "message": "Pull Request successfully merged"})
}

func (s *Server) pullJSON(rp *repo, is *issue, full bool) map[string]any {
	pr := is.pull
	full_ := rp.owner + "/" + rp.name
	head := s.headOf(rp, is)
	m := s.issueBase(rp, is)
	m["head"] = map[string]any{"ref": pr.head, "sha": head, "rp": map[string]any{"full_name": full_}}
	m["base"] = map[string]any{"ref": pr.base, "sha": rp.refs["refs/heads/"+pr.base], "rp": map[string]any{"full_name": full_}}
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
			_, ok := s.mergeable(rp, is)
			m["mergeable"] = ok
		}
		g := rp.git
		files := g.diffTrees(g.commits[s.prBase(rp, is)].tree, g.commits[head].tree)
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

func (s *Server) newIssue(rp *repo, title, body string, labels []string) *issue {
	now := epoch.Add(time.Duration(rp.nextNum) * time.Hour)
	is := &issue{number: rp.nextNum, id: 90000 + int64(rp.nextNum), title: title, body: body, state: "open", labels: labels, user: s.login, created: now, updated: now}
	rp.issues[is.number] = is
	rp.nextNum++
	return is
}

func (s *Server) issueBase(rp *repo, is *issue) map[string]any {
	labels := []any{}
	for _, l := range is.labels {
		labels = append(labels, map[string]any{"name": l})
	}
	m := map[string]any{
		"id": is.id, "number": is.number, "title": is.title, "body": is.body, "state": is.state,
		"labels": labels, "user": map[string]any{"login": is.user}, "comments": is.comments,
		"created_at": is.created.Format(time.RFC3339), "updated_at": is.updated.Format(time.RFC3339),
		"html_url": fmt.Sprintf("https://github.example/%s/%s/issues/%d", rp.owner, rp.name, is.number),
	}
	if is.closed != nil {
		m["closed_at"] = is.closed.Format(time.RFC3339)
	}
	return m
}

func (s *Server) issueJSON(rp *repo, is *issue) map[string]any {
	m := s.issueBase(rp, is)
	if is.pull != nil {
		m["pull_request"] = map[string]any{"url": fmt.Sprintf("https://api.github.example/repos/%s/%s/pulls/%d", rp.owner, rp.name, is.number)}
	}
	if !s.noSumm && !s.depsOff {
		m["issue_dependencies_summary"] = map[string]any{"blocked_by": len(rp.deps[is.number]), "blocking": 0}
	}
	return m
}

func (s *Server) routeIssues(w http.ResponseWriter, r *http.Request, rp *repo, seg []string, body []byte) {
	if len(seg) == 0 {
		switch r.Method {
		case http.MethodGet:
			q := r.URL.Query()
			var list []*issue
			for _, is := range rp.issues {
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
			slices.SortFunc(list, func(a, b *issue) int { return b.number - a.number })
			lo, hi := paginate(w, r, len(list))
			out := []any{}
			for _, is := range list[lo:hi] {
				out = append(out, s.issueJSON(rp, is))
			}
			writeJSON(w, 200, out)
		case http.MethodPost:
			var in struct {
				Title, Body string
				Labels      []string
			}
			_ = json.Unmarshal(body, &in)
			is := s.newIssue(rp, in.Title, in.Body, in.Labels)
			writeJSON(w, 201, s.issueJSON(rp, is))
		}
		return
	}
	n, _ := strconv.Atoi(seg[0])
	is := rp.issues[n]
	if is == nil {
		writeJSON(w, 404, msg("Not Found"))
		return
	}
	switch {
	case len(seg) == 1 && r.Method == http.MethodGet:
		writeJSON(w, 200, s.issueJSON(rp, is))
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
				is.pull.headSHA = s.headOf(rp, is)
			}
			is.state = *in.State
			is.closed = nil
			if is.state == "closed" {
				now := time.Now().UTC()
				is.closed = &now
			}
		}
		is.updated = is.updated.Add(time.Minute)
		writeJSON(w, 200, s.issueJSON(rp, is))
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
		rp.nextComment++
		is.comments++
		c := map[string]any{
			"id": rp.nextComment, "body": in.Body, "user": map[string]any{"login": s.login},
			"html_url":   fmt.Sprintf("https://github.example/%s/%s/issues/%d#issuecomment-%d", rp.owner, rp.name, n, rp.nextComment),
			"created_at": epoch.Format(time.RFC3339),
		}
		is.commentList = append(is.commentList, c)
		writeJSON(w, 201, c)
	case len(seg) == 2 && seg[1] == "comments" && r.Method == http.MethodGet:
		lo, hi := paginate(w, r, len(is.commentList))
		writeJSON(w, 200, append([]map[string]any{}, is.commentList[lo:hi]...))
	case len(seg) >= 3 && seg[1] == "dependencies" && seg[2] == "blocked_by":
		s.routeDeps(w, r, rp, is, seg[3:], body)
	default:
		writeJSON(w, 404, msg("Not Found"))
	}
}

func (s *Server) routeDeps(w http.ResponseWriter, r *http.Request, rp *repo, is *issue, seg []string, body []byte) {
	if s.depsOff {
		writeJSON(w, 404, msg("Not Found"))
		return
	}
	byID := func(id int64) *issue {
		for _, x := range rp.issues {
			if x.id == id {
				return x
			}
		}
		return nil
	}
	switch {
	case len(seg) == 0 && r.Method == http.MethodGet:
		out := []any{}
		for _, b := range rp.deps[is.number] {
			out = append(out, s.issueJSON(rp, rp.issues[b]))
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
		case slices.Contains(rp.deps[is.number], b.number):
			writeJSON(w, 422, msg("Dependency already exists"))
		default:
			rp.deps[is.number] = append(rp.deps[is.number], b.number)
			writeJSON(w, 201, s.issueJSON(rp, b))
		}
	case len(seg) == 1 && r.Method == http.MethodDelete:
		id, _ := strconv.ParseInt(seg[0], 10, 64)
		b := byID(id)
		if b == nil || !slices.Contains(rp.deps[is.number], b.number) {
			writeJSON(w, 404, msg("Not Found"))
			return
		}
		rp.deps[is.number] = slices.DeleteFunc(rp.deps[is.number], func(x int) bool { return x == b.number })
		writeJSON(w, 200, s.issueJSON(rp, b))
	default:
		writeJSON(w, 404, msg("Not Found"))
	}
}
