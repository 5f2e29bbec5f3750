package hub

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeGH is a GitHub REST API in memory: the endpoints the provider uses, with the state
// they act on, served over HTTP to the real go-github client. It records every request so
// tests can check what was sent.
type fakeGH struct {
	t     *testing.T
	srv   *httptest.Server
	token string
	login string

	mu       sync.Mutex
	orgs     map[string]bool
	repos    map[string]*fRepo
	nextID   int64
	reqs     []fReq
	hook     func(w http.ResponseWriter, r *http.Request) bool
	used     int
	truncate bool // recursive trees answer truncated
	depsOff  bool // the dependencies API answers 404
	noSumm   bool // issues carry no issue_dependencies_summary
	// updateLag is how many reads of a pull request still show its old head after an
	// update of its branch was accepted (GitHub moves the head in the background).
	updateLag int
}

type fReq struct {
	Method, Path, Query string
	Header              http.Header
	Body                []byte
}

type fRepo struct {
	id            int64
	owner, name   string
	private       bool
	hidden        bool // answers 403
	description   string
	defaultBranch string
	created       time.Time
	refs          map[string]string // "refs/heads/main" → sha
	git           *fGit
	issues        map[int]*fIssue
	nextNum       int
	nextComment   int64
	deps          map[int][]int          // issue → blocking issues
	checkRuns     map[string][]fCheckRun // commit sha → its check runs
	statuses      map[string][]fStatus   // commit sha → its latest status per context
	pending       map[int]*fUpdate       // pull request → its accepted, not yet visible branch update
}

type fIssue struct {
	number   int
	id       int64
	title    string
	body     string
	state    string
	labels   []string
	user     string
	comments int
	// commentList is every comment posted, oldest first, as GitHub answers it.
	commentList []map[string]any
	created     time.Time
	updated     time.Time
	closed      *time.Time
	pull        *fPull
}

type fPull struct {
	head, base string
	headSHA    string // last known head (kept once closed)
	draft      bool
	merged     bool
	mergedAt   *time.Time
	mergeSHA   string
	mergeable  *bool // forced answer; nil = computed
}

const fakeToken = "ghp-test-token"

func newFake(t *testing.T) *fakeGH {
	t.Helper()
	f := &fakeGH{t: t, token: fakeToken, login: "octo", orgs: map[string]bool{"acme": true}, repos: map[string]*fRepo{}, nextID: 1000}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// provider is a Provider talking to the fake.
func (f *fakeGH) provider(t *testing.T, mod ...func(*Config)) *Provider {
	t.Helper()
	cfg := Config{Token: f.token, BaseURL: f.srv.URL, HTTPClient: f.srv.Client(), MaxRetryWait: 5 * time.Second}
	for _, m := range mod {
		m(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (f *fakeGH) setHook(h func(w http.ResponseWriter, r *http.Request) bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hook = h
}

// requests returns the recorded requests with method whose path contains part.
func (f *fakeGH) requests(method, part string) []fReq {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fReq
	for _, r := range f.reqs {
		if (method == "" || r.Method == method) && strings.Contains(r.Path, part) {
			out = append(out, r)
		}
	}
	return out
}

// addRepo creates a repository; with files, an initial commit on main holds them
// (mode 100755 for names ending in ".sh", symlinks for values starting with "->").
func (f *fakeGH) addRepo(full string, files map[string]string) *fRepo {
	f.mu.Lock()
	defer f.mu.Unlock()
	owner, name, _ := strings.Cut(full, "/")
	r := f.newRepo(owner, name)
	if files != nil {
		r.refs["refs/heads/main"] = r.commit("", files, nil, "initial")
	}
	return r
}

func (f *fakeGH) newRepo(owner, name string) *fRepo {
	f.nextID++
	r := &fRepo{id: f.nextID, owner: owner, name: name, defaultBranch: "main", created: fakeEpoch,
		refs: map[string]string{}, git: newFGit(), issues: map[int]*fIssue{}, nextNum: 1, nextComment: 500, deps: map[int][]int{},
		pending: map[int]*fUpdate{}}
	f.repos[owner+"/"+name] = r
	return r
}

// commitTo writes files (a value of "\x00delete" removes the path) on top of branch.
func (f *fakeGH) commitTo(full, branch string, files map[string]string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.repos[full]
	parent := r.refs["refs/heads/"+branch]
	sha := r.commit(parent, files, nil, "change on "+branch)
	r.refs["refs/heads/"+branch] = sha
	return sha
}

func (r *fRepo) commit(parent string, files map[string]string, parents []string, msg string) string {
	flat := map[string]fEntry{}
	if parent != "" {
		flat = r.git.flatten(r.git.commits[parent].tree)
		parents = append([]string{parent}, parents...)
	}
	for p, content := range files {
		switch {
		case content == "\x00delete":
			delete(flat, p)
		case strings.HasPrefix(content, "->"):
			flat[p] = fEntry{mode: "120000", typ: "blob", sha: r.git.putBlob([]byte(strings.TrimPrefix(content, "->")))}
		case strings.HasSuffix(p, ".sh"):
			flat[p] = fEntry{mode: "100755", typ: "blob", sha: r.git.putBlob([]byte(content))}
		default:
			flat[p] = fEntry{mode: "100644", typ: "blob", sha: r.git.putBlob([]byte(content))}
		}
	}
	return r.git.putCommit(r.git.build(flat), parents, msg, fSig{"Seed", "seed@example.com"})
}

func (f *fakeGH) repo(full string) *fRepo {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.repos[full]
}

// with runs fn under the fake's lock (to read or change state from a test).
func (f *fakeGH) with(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn()
}

// --- HTTP ---

func (f *fakeGH) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	path := strings.TrimPrefix(r.URL.Path, "/api/v3")
	f.mu.Lock()
	f.reqs = append(f.reqs, fReq{Method: r.Method, Path: path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body})
	hook := f.hook
	f.used++
	used := f.used
	f.mu.Unlock()

	h := w.Header()
	h.Set("X-RateLimit-Limit", "5000")
	h.Set("X-RateLimit-Remaining", strconv.Itoa(5000-used))
	h.Set("X-RateLimit-Used", strconv.Itoa(used))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10))
	h.Set("X-RateLimit-Resource", "core")

	if hook != nil && hook(w, r) {
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+f.token {
		writeJSON(w, http.StatusUnauthorized, msg("Bad credentials"))
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.route(w, r, path, body)
}

func msg(m string) map[string]any { return map[string]any{"message": m} }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func validation(errors ...map[string]any) map[string]any {
	return map[string]any{"message": "Validation Failed", "errors": errors}
}

func (f *fakeGH) route(w http.ResponseWriter, r *http.Request, path string, body []byte) {
	seg := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case path == "/user" && r.Method == http.MethodGet:
		writeJSON(w, 200, map[string]any{"login": f.login, "id": 1})
	case path == "/user/repos" && r.Method == http.MethodGet:
		aff := r.URL.Query().Get("affiliation")
		f.listRepos(w, r, func(x *fRepo) bool {
			return !x.hidden && (x.owner == f.login || (aff != "owner" && f.orgs[x.owner]))
		})
	case path == "/user/repos" && r.Method == http.MethodPost:
		f.createRepo(w, f.login, body)
	case len(seg) == 3 && seg[0] == "orgs" && seg[2] == "repos":
		if !f.orgs[seg[1]] {
			writeJSON(w, 404, msg("Not Found"))
			return
		}
		if r.Method == http.MethodPost {
			f.createRepo(w, seg[1], body)
			return
		}
		f.listRepos(w, r, func(x *fRepo) bool { return x.owner == seg[1] && !x.hidden })
	case len(seg) == 3 && seg[0] == "users" && seg[2] == "repos":
		f.listRepos(w, r, func(x *fRepo) bool { return x.owner == seg[1] && !x.private && !x.hidden })
	case len(seg) >= 3 && seg[0] == "repos":
		repo := f.repos[seg[1]+"/"+seg[2]]
		switch {
		case repo == nil:
			writeJSON(w, 404, msg("Not Found"))
		case repo.hidden:
			writeJSON(w, 403, msg("Resource not accessible by personal access token"))
		default:
			f.routeRepo(w, r, repo, seg[3:], body)
		}
	case len(seg) == 5 && seg[0] == "codeload":
		repo := f.repos[seg[1]+"/"+seg[2]]
		if repo == nil || repo.git.commits[seg[4]] == nil {
			writeJSON(w, 404, msg("Not Found"))
			return
		}
		w.Header().Set("Content-Type", "application/x-gzip")
		_, _ = w.Write(repo.git.tarball(repo.owner, repo.name, seg[4]))
	default:
		writeJSON(w, 404, msg("Not Found"))
	}
}

func (f *fakeGH) listRepos(w http.ResponseWriter, r *http.Request, keep func(*fRepo) bool) {
	var list []*fRepo
	for _, x := range f.repos {
		if keep(x) {
			list = append(list, x)
		}
	}
	slices.SortFunc(list, func(a, b *fRepo) int { return strings.Compare(a.owner+"/"+a.name, b.owner+"/"+b.name) })
	lo, hi := paginate(w, r, len(list))
	out := []any{}
	for _, x := range list[lo:hi] {
		out = append(out, f.repoJSON(x))
	}
	writeJSON(w, 200, out)
}

// paginate picks the page asked for and sets GitHub's Link header.
func paginate(w http.ResponseWriter, r *http.Request, n int) (int, int) {
	q := r.URL.Query()
	per, _ := strconv.Atoi(q.Get("per_page"))
	if per <= 0 {
		per = 30
	}
	page, _ := strconv.Atoi(q.Get("page"))
	if page <= 0 {
		page = 1
	}
	lo := min((page-1)*per, n)
	hi := min(lo+per, n)
	last := max((n+per-1)/per, 1)
	var links []string
	link := func(p int, rel string) {
		u := *r.URL
		qq := u.Query()
		qq.Set("page", strconv.Itoa(p))
		qq.Set("per_page", strconv.Itoa(per))
		u.RawQuery = qq.Encode()
		links = append(links, fmt.Sprintf(`<http://%s%s>; rel="%s"`, r.Host, u.RequestURI(), rel))
	}
	if page < last {
		link(page+1, "next")
		link(last, "last")
	}
	if len(links) > 0 {
		w.Header().Set("Link", strings.Join(links, ", "))
	}
	return lo, hi
}

func (f *fakeGH) createRepo(w http.ResponseWriter, owner string, body []byte) {
	var in struct {
		Name        string `json:"name"`
		Description string `json:"description"`
		Private     bool   `json:"private"`
	}
	_ = json.Unmarshal(body, &in)
	if f.repos[owner+"/"+in.Name] != nil {
		writeJSON(w, 422, map[string]any{"message": "Repository creation failed.", "errors": []any{
			map[string]any{"resource": "Repository", "code": "custom", "field": "name", "message": "name already exists on this account"},
		}})
		return
	}
	r := f.newRepo(owner, in.Name)
	r.description, r.private = in.Description, in.Private
	writeJSON(w, 201, f.repoJSON(r))
}

func (f *fakeGH) repoJSON(r *fRepo) map[string]any {
	size := 0
	if len(r.refs) > 0 {
		size = 12
	}
	full := r.owner + "/" + r.name
	return map[string]any{
		"id": r.id, "name": r.name, "full_name": full, "owner": map[string]any{"login": r.owner},
		"private": r.private, "description": r.description, "default_branch": r.defaultBranch,
		"clone_url": "https://github.example/" + full + ".git", "html_url": "https://github.example/" + full,
		"size": size, "created_at": r.created.Format(time.RFC3339), "pushed_at": r.created.Add(time.Hour).Format(time.RFC3339),
	}
}

func (f *fakeGH) routeRepo(w http.ResponseWriter, r *http.Request, repo *fRepo, seg []string, body []byte) {
	g := repo.git
	empty := len(repo.refs) == 0
	emptyAnswer := func() { writeJSON(w, 409, msg("Git Repository is empty.")) }
	first := ""
	if len(seg) > 0 {
		first = seg[0]
	}
	switch {
	case len(seg) == 0 && r.Method == http.MethodGet:
		writeJSON(w, 200, f.repoJSON(repo))

	case first == "contents" && r.Method == http.MethodPut:
		f.putContents(w, repo, strings.Join(seg[1:], "/"), body)

	case first == "git" && len(seg) >= 3 && seg[1] == "ref" && r.Method == http.MethodGet:
		if empty {
			emptyAnswer()
			return
		}
		ref := "refs/" + strings.Join(seg[2:], "/")
		sha, ok := repo.refs[ref]
		if !ok {
			writeJSON(w, 404, msg("Not Found"))
			return
		}
		writeJSON(w, 200, refJSON(repo, ref, sha))
	case first == "git" && len(seg) == 2 && seg[1] == "refs" && r.Method == http.MethodPost:
		var in struct{ Ref, SHA string }
		_ = json.Unmarshal(body, &in)
		switch {
		case empty:
			emptyAnswer()
		case repo.refs[in.Ref] != "":
			writeJSON(w, 422, msg("Reference already exists"))
		case g.commits[in.SHA] == nil:
			writeJSON(w, 422, msg("Object does not exist"))
		default:
			repo.refs[in.Ref] = in.SHA
			writeJSON(w, 201, refJSON(repo, in.Ref, in.SHA))
		}
	case first == "git" && len(seg) >= 3 && seg[1] == "refs" && r.Method == http.MethodPatch:
		ref := "refs/" + strings.Join(seg[2:], "/")
		var in struct {
			SHA   string `json:"sha"`
			Force *bool  `json:"force"`
		}
		_ = json.Unmarshal(body, &in)
		cur, ok := repo.refs[ref]
		switch {
		case !ok:
			writeJSON(w, 422, msg("Reference does not exist"))
		case g.commits[in.SHA] == nil:
			writeJSON(w, 422, msg("Object does not exist"))
		case (in.Force == nil || !*in.Force) && !g.ancestors(in.SHA)[cur]:
			writeJSON(w, 422, msg("Update is not a fast forward"))
		default:
			repo.refs[ref] = in.SHA
			writeJSON(w, 200, refJSON(repo, ref, in.SHA))
		}
	case first == "git" && len(seg) >= 3 && seg[1] == "refs" && r.Method == http.MethodDelete:
		ref := "refs/" + strings.Join(seg[2:], "/")
		if _, ok := repo.refs[ref]; !ok {
			writeJSON(w, 422, msg("Reference does not exist"))
			return
		}
		delete(repo.refs, ref)
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
		author := fSig{f.login, f.login + "@users.noreply.github.com"}
		if in.Author != nil {
			author = fSig{in.Author.Name, in.Author.Email}
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
		f.getTree(w, g, tree, r.URL.Query().Get("recursive") != "")
	case first == "git" && len(seg) == 2 && seg[1] == "trees" && r.Method == http.MethodPost:
		f.postTree(w, g, body)

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
		f.getChecks(w, r, repo, seg[1], seg[2])
	case first == "commits" && len(seg) == 2 && r.Method == http.MethodGet:
		f.getCommit(w, r, repo, seg[1])
	case first == "compare" && len(seg) == 2 && r.Method == http.MethodGet:
		base, head, ok := strings.Cut(seg[1], "...")
		bs, hs := repo.resolve(base), repo.resolve(head)
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
		sha := repo.resolve(ref)
		if empty || sha == "" {
			writeJSON(w, 404, msg("Not Found"))
			return
		}
		w.Header().Set("Location", fmt.Sprintf("%s/codeload/%s/%s/legacy.tar.gz/%s", f.srv.URL, repo.owner, repo.name, sha))
		w.WriteHeader(http.StatusFound)

	case first == "pulls":
		f.routePulls(w, r, repo, seg[1:], body)
	case first == "issues":
		f.routeIssues(w, r, repo, seg[1:], body)
	default:
		writeJSON(w, 404, msg("Not Found"))
	}
}

func refJSON(repo *fRepo, ref, sha string) map[string]any {
	typ := "commit"
	if repo.git.tags[sha] != nil {
		typ = "tag"
	}
	return map[string]any{"ref": ref, "object": map[string]any{"sha": sha, "type": typ}}
}

func gitCommitJSON(c *fCommit) map[string]any {
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
func (repo *fRepo) resolve(ref string) string {
	if sha, ok := repo.refs["refs/heads/"+ref]; ok {
		return sha
	}
	if sha, ok := repo.refs["refs/tags/"+ref]; ok {
		if t := repo.git.tags[sha]; t != nil {
			return t.object
		}
		return sha
	}
	if repo.git.commits[ref] != nil {
		return ref
	}
	if len(ref) >= 4 {
		var found []string
		for sha := range repo.git.commits {
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

func (f *fakeGH) getTree(w http.ResponseWriter, g *fGit, tree string, recursive bool) {
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
	truncated := recursive && f.truncate
	if truncated {
		entries = entries[:len(entries)/2]
	}
	writeJSON(w, 200, map[string]any{"sha": tree, "tree": entries, "truncated": truncated})
}

func (f *fakeGH) postTree(w http.ResponseWriter, g *fGit, body []byte) {
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
	flat := map[string]fEntry{}
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
			flat[e.Path] = fEntry{mode: e.Mode, typ: "blob", sha: g.putBlob([]byte(*e.Content))}
		case e.Type == "tree":
			for p, x := range g.flatten(*e.SHA) {
				flat[e.Path+"/"+p] = x
			}
		default:
			if _, ok := g.blobs[*e.SHA]; !ok {
				writeJSON(w, 422, msg("tree.sha is not a valid blob"))
				return
			}
			flat[e.Path] = fEntry{mode: e.Mode, typ: e.Type, sha: *e.SHA}
		}
	}
	writeJSON(w, 201, map[string]any{"sha": g.build(flat)})
}

func (f *fakeGH) putContents(w http.ResponseWriter, repo *fRepo, path string, body []byte) {
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
	branch := repo.defaultBranch
	if in.Branch != nil {
		branch = *in.Branch
	}
	g := repo.git
	parent := repo.refs["refs/heads/"+branch]
	flat := map[string]fEntry{}
	var parents []string
	if parent != "" {
		flat = g.flatten(g.commits[parent].tree)
		parents = []string{parent}
		if _, ok := flat[path]; ok && in.SHA == nil {
			writeJSON(w, 422, msg(`Invalid request. "sha" wasn't supplied.`))
			return
		}
	} else if len(repo.refs) > 0 {
		writeJSON(w, 404, msg("Branch not found"))
		return
	}
	flat[path] = fEntry{mode: "100644", typ: "blob", sha: g.putBlob(data)}
	author := fSig{f.login, ""}
	if in.Author != nil {
		author = fSig{in.Author.Name, in.Author.Email}
	}
	sha := g.putCommit(g.build(flat), parents, in.Message, author)
	repo.refs["refs/heads/"+branch] = sha
	writeJSON(w, 201, map[string]any{"content": map[string]any{"path": path, "sha": flat[path].sha}, "commit": gitCommitJSON(g.commits[sha])})
}

func (f *fakeGH) getCommit(w http.ResponseWriter, r *http.Request, repo *fRepo, ref string) {
	if len(repo.refs) == 0 {
		writeJSON(w, 409, msg("Git Repository is empty."))
		return
	}
	sha := repo.resolve(ref)
	if sha == "" {
		writeJSON(w, 422, msg("No commit found for SHA: "+ref))
		return
	}
	if strings.Contains(r.Header.Get("Accept"), "sha") {
		_, _ = io.WriteString(w, sha)
		return
	}
	g := repo.git
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

// tag adds a lightweight (annotated false) or annotated tag.
func (f *fakeGH) tag(full, name, commit string, annotated bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.repos[full]
	sha := commit
	if annotated {
		sha = hash("tag " + name + commit)
		r.git.tags[sha] = &fTag{sha: sha, name: name, object: commit, objectType: "commit"}
	}
	r.refs["refs/tags/"+name] = sha
}
