package fakegithub

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// The repository endpoints of the fake: the git data API, contents, commits, compare and
// tarballs; pull requests, issues and checks are routed on to their own files.

func (s *Server) routeRepo(w http.ResponseWriter, r *http.Request, rp *repo, seg []string, body []byte) {
	g := rp.git
	empty := len(rp.refs) == 0
	emptyAnswer := func() { writeJSON(w, 409, msg("Git Repository is empty.")) }
	first := ""
	if len(seg) > 0 {
		first = seg[0]
	}
	switch {
	case len(seg) == 0 && r.Method == http.MethodGet:
		writeJSON(w, 200, s.repoJSON(rp))

	case first == "contents" && r.Method == http.MethodPut:
		s.putContents(w, rp, strings.Join(seg[1:], "/"), body)

	case first == "git" && len(seg) >= 3 && seg[1] == "ref" && r.Method == http.MethodGet:
		if empty {
			emptyAnswer()
			return
		}
		ref := "refs/" + strings.Join(seg[2:], "/")
		sha, ok := rp.refs[ref]
		if !ok {
			writeJSON(w, 404, msg("Not Found"))
			return
		}
		writeJSON(w, 200, refJSON(rp, ref, sha))
	case first == "git" && len(seg) == 2 && seg[1] == "refs" && r.Method == http.MethodPost:
		var in struct{ Ref, SHA string }
		_ = json.Unmarshal(body, &in)
		switch {
		case empty:
			emptyAnswer()
		case rp.refs[in.Ref] != "":
			writeJSON(w, 422, msg("Reference already exists"))
		case g.commits[in.SHA] == nil:
			writeJSON(w, 422, msg("Object does not exist"))
		default:
			rp.refs[in.Ref] = in.SHA
			writeJSON(w, 201, refJSON(rp, in.Ref, in.SHA))
		}
	case first == "git" && len(seg) >= 3 && seg[1] == "refs" && r.Method == http.MethodPatch:
		ref := "refs/" + strings.Join(seg[2:], "/")
		var in struct {
			SHA   string `json:"sha"`
			Force *bool  `json:"force"`
		}
		_ = json.Unmarshal(body, &in)
		cur, ok := rp.refs[ref]
		switch {
		case !ok:
			writeJSON(w, 422, msg("Reference does not exist"))
		case g.commits[in.SHA] == nil:
			writeJSON(w, 422, msg("Object does not exist"))
		case (in.Force == nil || !*in.Force) && !g.ancestors(in.SHA)[cur]:
			writeJSON(w, 422, msg("Update is not a fast forward"))
		default:
			rp.refs[ref] = in.SHA
			writeJSON(w, 200, refJSON(rp, ref, in.SHA))
		}
	case first == "git" && len(seg) >= 3 && seg[1] == "refs" && r.Method == http.MethodDelete:
		ref := "refs/" + strings.Join(seg[2:], "/")
		if _, ok := rp.refs[ref]; !ok {
			writeJSON(w, 422, msg("Reference does not exist"))
			return
		}
		delete(rp.refs, ref)
		w.WriteHeader(204)
	case first == "git" && len(seg) == 3 && seg[1] == "tags" && r.Method == http.MethodGet:
		tag := g.tags[seg[2]]
		if tag == nil {
			writeJSON(w, 404, msg("Not Found"))
			return
		}
		writeJSON(w, 200, map[string]any{"sha": tag.sha, "tag": tag.name, "object": map[string]any{"sha": tag.object, "type": tag.objectType}})

	case first == "git" && len(seg) == 3 && seg[1] == "commits" && r.Method == http.MethodGet:
		if empty {
			emptyAnswer()
			return
		}
		c := g.commits[seg[2]]
		if c == nil {
			writeJSON(w, 404, msg("Not Found"))
			return
		}
		writeJSON(w, 200, gitCommitJSON(c))
	case first == "git" && len(seg) == 2 && seg[1] == "commits" && r.Method == http.MethodPost:
		var in struct {
			Message string   `json:"message"`
			Tree    string   `json:"tree"`
			Parents []string `json:"parents"`
			Author  *struct{ Name, Email string }
		}
		_ = json.Unmarshal(body, &in)
		if g.trees[in.Tree] == nil {
			writeJSON(w, 422, msg("Tree SHA does not exist"))
			return
		}
		for _, p := range in.Parents {
			if g.commits[p] == nil {
				writeJSON(w, 422, msg("Parent SHA does not exist or is not a commit object"))
				return
			}
		}
		author := sig{s.login, s.login + "@users.noreply.github.com"}
		if in.Author != nil {
			author = sig{in.Author.Name, in.Author.Email}
		}
		sha := g.putCommit(in.Tree, in.Parents, in.Message, author)
		writeJSON(w, 201, gitCommitJSON(g.commits[sha]))

	case first == "git" && len(seg) == 3 && seg[1] == "trees" && r.Method == http.MethodGet:
		if empty {
			emptyAnswer()
			return
		}
		tree := g.treeOf(seg[2])
		if tree == "" {
			writeJSON(w, 404, msg("Not Found"))
			return
		}
		s.getTree(w, g, tree, r.URL.Query().Get("recursive") != "")
	case first == "git" && len(seg) == 2 && seg[1] == "trees" && r.Method == http.MethodPost:
		s.postTree(w, g, body)

	case first == "git" && len(seg) == 3 && seg[1] == "blobs" && r.Method == http.MethodGet:
		data, ok := g.blobs[seg[2]]
		if !ok {
			writeJSON(w, 404, msg("Not Found"))
			return
		}
		if strings.Contains(r.Header.Get("Accept"), "raw") {
			w.Header().Set("Content-Type", "application/vnd.github.raw")
			_, _ = w.Write(data)
			return
		}
		writeJSON(w, 200, map[string]any{"sha": seg[2], "size": len(data), "encoding": "base64", "content": base64.StdEncoding.EncodeToString(data)})
	case first == "git" && len(seg) == 2 && seg[1] == "blobs" && r.Method == http.MethodPost:
		var in struct{ Content, Encoding string }
		_ = json.Unmarshal(body, &in)
		data := []byte(in.Content)
		if in.Encoding == "base64" {
			var err error
			if data, err = base64.StdEncoding.DecodeString(in.Content); err != nil {
				writeJSON(w, 422, msg("bad base64"))
				return
			}
		}
		writeJSON(w, 201, map[string]any{"sha": g.putBlob(data)})

	case first == "commits" && len(seg) == 3 && (seg[2] == "check-runs" || seg[2] == "status") && r.Method == http.MethodGet:
		s.getChecks(w, r, rp, seg[1], seg[2])
	case first == "commits" && len(seg) == 2 && r.Method == http.MethodGet:
		s.getCommit(w, r, rp, seg[1])
	case first == "compare" && len(seg) == 2 && r.Method == http.MethodGet:
		base, head, ok := strings.Cut(seg[1], "...")
		bs, hs := rp.resolve(base), rp.resolve(head)
		if !ok || bs == "" || hs == "" {
			writeJSON(w, 404, msg("Not Found"))
			return
		}
		mb := g.mergeBase(bs, hs)
		shared := len(g.ancestors(mb)) // commits on both sides
		ahead, behind := len(g.ancestors(hs))-shared, len(g.ancestors(bs))-shared
		status := "diverged"
		switch {
		case ahead == 0 && behind == 0:
			status = "identical"
		case behind == 0:
			status = "ahead"
		case ahead == 0:
			status = "behind"
		}
		writeJSON(w, 200, map[string]any{
			"base_commit": map[string]any{"sha": bs}, "merge_base_commit": map[string]any{"sha": mb},
			"status": status, "ahead_by": ahead, "behind_by": behind, "total_commits": ahead,
			"files": g.diffTrees(g.commits[mb].tree, g.commits[hs].tree),
		})
	case first == "tarball" && r.Method == http.MethodGet:
		ref := strings.Join(seg[1:], "/")
		sha := rp.resolve(ref)
		if empty || sha == "" {
			writeJSON(w, 404, msg("Not Found"))
			return
		}
		w.Header().Set("Location", fmt.Sprintf("%s/codeload/%s/%s/legacy.tar.gz/%s", "http://"+r.Host, rp.owner, rp.name, sha))
		w.WriteHeader(http.StatusFound)

	case first == "events" && len(seg) == 1 && r.Method == http.MethodGet:
		// Newest first, one page; the ETag changes with every event added, and a read with
		// the current one is 304 with no body, as GitHub answers a conditional read.
		etag := fmt.Sprintf(`W/"%d"`, len(rp.events))
		w.Header().Set("X-Poll-Interval", "60")
		if r.Header.Get("If-None-Match") == etag {
			w.Header().Set("ETag", etag)
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", etag)
		out := make([]map[string]any, 0, len(rp.events))
		for i := len(rp.events) - 1; i >= 0 && len(out) < 100; i-- {
			out = append(out, rp.events[i])
		}
		writeJSON(w, 200, out)
	case first == "collaborators" && len(seg) == 3 && seg[2] == "permission" && r.Method == http.MethodGet:
		perm := rp.permissions[seg[1]]
		if perm == "" && seg[1] == s.login {
			perm = "admin"
		}
		if perm == "" {
			perm = "none"
		}
		writeJSON(w, 200, map[string]any{"permission": perm, "role_name": perm, "user": map[string]any{"login": seg[1]}})
	case first == "pulls":
		s.routePulls(w, r, rp, seg[1:], body)
	case first == "issues":
		s.routeIssues(w, r, rp, seg[1:], body)
	default:
		writeJSON(w, 404, msg("Not Found"))
	}
}

func refJSON(rp *repo, ref, sha string) map[string]any {
	typ := "commit"
	if rp.git.tags[sha] != nil {
		typ = "tag"
	}
	return map[string]any{"ref": ref, "object": map[string]any{"sha": sha, "type": typ}}
}

func gitCommitJSON(c *gitCommit) map[string]any {
	parents := []any{}
	for _, p := range c.parents {
		parents = append(parents, map[string]any{"sha": p})
	}
	return map[string]any{
		"sha": c.sha, "message": c.message, "tree": map[string]any{"sha": c.tree}, "parents": parents,
		"author": map[string]any{"name": c.author.name, "email": c.author.email, "date": c.time.Format(time.RFC3339)},
	}
}

// resolve is what GitHub makes of a ref in a URL: branch, tag, full or abbreviated sha.
func (rp *repo) resolve(ref string) string {
	if sha, ok := rp.refs["refs/heads/"+ref]; ok {
		return sha
	}
	if sha, ok := rp.refs["refs/tags/"+ref]; ok {
		if t := rp.git.tags[sha]; t != nil {
			return t.object
		}
		return sha
	}
	if rp.git.commits[ref] != nil {
		return ref
	}
	if len(ref) >= 4 {
		var found []string
		for sha := range rp.git.commits {
			if strings.HasPrefix(sha, ref) {
				found = append(found, sha)
			}
		}
		if len(found) == 1 {
			return found[0]
		}
	}
	return ""
}

func (s *Server) getTree(w http.ResponseWriter, g *gitStore, tree string, recursive bool) {
	var entries []map[string]any
	var walk func(sha, prefix string)
	walk = func(sha, prefix string) {
		for _, e := range g.trees[sha] {
			m := map[string]any{"path": prefix + e.name, "mode": e.mode, "type": e.typ, "sha": e.sha}
			if e.typ == "blob" {
				m["size"] = len(g.blobs[e.sha])
			}
			entries = append(entries, m)
			if recursive && e.typ == "tree" {
				walk(e.sha, prefix+e.name+"/")
			}
		}
	}
	walk(tree, "")
	truncated := recursive && s.truncate
	if truncated {
		entries = entries[:len(entries)/2]
	}
	writeJSON(w, 200, map[string]any{"sha": tree, "tree": entries, "truncated": truncated})
}

func (s *Server) postTree(w http.ResponseWriter, g *gitStore, body []byte) {
	var in struct {
		BaseTree string `json:"base_tree"`
		Tree     []struct {
			Path    string  `json:"path"`
			Mode    string  `json:"mode"`
			Type    string  `json:"type"`
			SHA     *string `json:"sha"`
			Content *string `json:"content"`
		} `json:"tree"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		writeJSON(w, 400, msg("Problems parsing JSON"))
		return
	}
	flat := map[string]entry{}
	if in.BaseTree != "" {
		if g.trees[in.BaseTree] == nil {
			writeJSON(w, 422, msg("base_tree is not a valid tree"))
			return
		}
		flat = g.flatten(in.BaseTree)
	}
	for _, e := range in.Tree {
		switch {
		case e.SHA == nil && e.Content == nil:
			delete(flat, e.Path)
			for p := range flat {
				if strings.HasPrefix(p, e.Path+"/") {
					delete(flat, p)
				}
			}
		case e.Content != nil:
			flat[e.Path] = entry{mode: e.Mode, typ: "blob", sha: g.putBlob([]byte(*e.Content))}
		case e.Type == "tree":
			for p, x := range g.flatten(*e.SHA) {
				flat[e.Path+"/"+p] = x
			}
		default:
			if _, ok := g.blobs[*e.SHA]; !ok {
				writeJSON(w, 422, msg("tree.sha is not a valid blob"))
				return
			}
			flat[e.Path] = entry{mode: e.Mode, typ: e.Type, sha: *e.SHA}
		}
	}
	writeJSON(w, 201, map[string]any{"sha": g.build(flat)})
}

func (s *Server) putContents(w http.ResponseWriter, rp *repo, path string, body []byte) {
	var in struct {
		Message string  `json:"message"`
		Content string  `json:"content"`
		Branch  *string `json:"branch"`
		SHA     *string `json:"sha"`
		Author  *struct{ Name, Email string }
	}
	_ = json.Unmarshal(body, &in)
	data, err := base64.StdEncoding.DecodeString(in.Content)
	if err != nil {
		writeJSON(w, 422, msg("content is not valid Base64"))
		return
	}
	branch := rp.defaultBranch
	if in.Branch != nil {
		branch = *in.Branch
	}
	g := rp.git
	parent := rp.refs["refs/heads/"+branch]
	flat := map[string]entry{}
	var parents []string
	if parent != "" {
		flat = g.flatten(g.commits[parent].tree)
		parents = []string{parent}
		if _, ok := flat[path]; ok && in.SHA == nil {
			writeJSON(w, 422, msg(`Invalid request. "sha" wasn't supplied.`))
			return
		}
	} else if len(rp.refs) > 0 {
		writeJSON(w, 404, msg("Branch not found"))
		return
	}
	flat[path] = entry{mode: "100644", typ: "blob", sha: g.putBlob(data)}
	author := sig{s.login, ""}
	if in.Author != nil {
		author = sig{in.Author.Name, in.Author.Email}
	}
	sha := g.putCommit(g.build(flat), parents, in.Message, author)
	rp.refs["refs/heads/"+branch] = sha
	writeJSON(w, 201, map[string]any{"content": map[string]any{"path": path, "sha": flat[path].sha}, "commit": gitCommitJSON(g.commits[sha])})
}

func (s *Server) getCommit(w http.ResponseWriter, r *http.Request, rp *repo, ref string) {
	if len(rp.refs) == 0 {
		writeJSON(w, 409, msg("Git Repository is empty."))
		return
	}
	sha := rp.resolve(ref)
	if sha == "" {
		writeJSON(w, 422, msg("No commit found for SHA: "+ref))
		return
	}
	if strings.Contains(r.Header.Get("Accept"), "sha") {
		_, _ = io.WriteString(w, sha)
		return
	}
	g := rp.git
	c := g.commits[sha]
	base := ""
	if len(c.parents) > 0 {
		base = g.commits[c.parents[0]].tree
	}
	files := g.diffTrees(base, c.tree)
	add, del := 0, 0
	for _, fd := range files {
		add += fd.Additions
		del += fd.Deletions
	}
	lo, hi := paginate(w, r, len(files))
	writeJSON(w, 200, map[string]any{
		"sha": sha, "commit": gitCommitJSON(c), "stats": map[string]any{"additions": add, "deletions": del, "total": add + del},
		"files": files[lo:hi],
	})
}
