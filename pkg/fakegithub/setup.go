package fakegithub

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The methods a test sets the fake's content up with and reads it back through.

// Values of Commit's files map besides file contents.
const (
	// Delete removes the path.
	Delete = "\x00delete"
	// SymlinkPrefix starts a symlink's value: "->" + target.
	SymlinkPrefix = "->"
	// submodulePrefix starts a submodule's value (Submodule).
	submodulePrefix = "\x00submodule "
)

// Submodule is Commit's value for a submodule entry (mode 160000) at commit sha.
func Submodule(sha string) string { return submodulePrefix + sha }

// RepoOptions are a repository's settings besides its content.
type RepoOptions struct {
	Description string
	Private     bool
	// Hidden makes every call on the repository answer 403, as for a token without access.
	Hidden bool
}

// Signature is a commit's author.
type Signature struct{ Name, Email string }

// Commit is a commit as the fake stores it.
type Commit struct {
	SHA, Tree string
	Parents   []string
	Message   string
	Author    Signature
	Time      time.Time
}

// File is a path's entry in a commit: Mode is git's (100644, 100755, 120000, 160000),
// Content the blob's (a symlink's target; "" for a submodule, whose SHA is its commit).
type File struct {
	Mode, SHA, Content string
}

// Issue is an issue (or pull request: Pull is set) of a repository. AddIssue reads only
// Title, Body, Labels and BlockedBy.
type Issue struct {
	Number      int
	Title, Body string
	// State is "open" or "closed".
	State     string
	Labels    []string
	BlockedBy []int
	// Comments are the bodies of the comments posted, oldest first.
	Comments []string
	Pull     *Pull
}

// Pull is what an issue has of a pull request.
type Pull struct {
	Head, Base string
	// HeadSHA is the head commit: the branch's while open, the last one once closed.
	HeadSHA        string
	Draft, Merged  bool
	MergeCommitSHA string
}

type repo struct {
	id            int64
	owner, name   string
	private       bool
	hidden        bool // answers 403
	description   string
	defaultBranch string
	created       time.Time
	refs          map[string]string // "refs/heads/main" → sha
	git           *gitStore
	issues        map[int]*issue
	nextNum       int
	nextComment   int64
	deps          map[int][]int         // issue → blocking issues
	checkRuns     map[string][]CheckRun // commit sha → its check runs
	statuses      map[string][]Status   // commit sha → its latest status per context
	ruled         map[string]bool       // commits the checks rule was asked about
	pending       map[int]*update       // pull request → its accepted, not yet visible branch update
	permissions   map[string]string     // login → admin, write or read (SetPermission)
	events        []map[string]any      // the event feed, oldest first (AddEvent)
}

type issue struct {
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
	pull        *pull
}

type pull struct {
	head, base string
	headSHA    string // last known head (kept once closed)
	draft      bool
	merged     bool
	mergedAt   *time.Time
	mergeSHA   string
	mergeable  *bool // forced answer; nil = computed
}

// AddOrg makes an organisation exist.
func (s *Server) AddOrg(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.orgs[name] = true
}

// AddRepo creates repository full ("owner/name") with default branch main; with files
// (see Commit for the values), an initial commit on main holds them. It panics when the
// repository exists.
func (s *Server) AddRepo(full string, files map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	owner, name, ok := strings.Cut(full, "/")
	if !ok || s.repos[full] != nil {
		panic(fmt.Sprintf("fakegithub: AddRepo(%q): exists or not owner/name", full))
	}
	r := s.newRepo(owner, name)
	if files != nil {
		r.refs["refs/heads/main"] = r.commit("", files, "initial")
	}
}

// SetPermission gives login permission ("admin", "write", "read"; "" removes it) on
// repository full, as the collaborator permission API answers it; the token's own user is
// admin of its repositories, anyone else "none".
func (s *Server) SetPermission(full, login, permission string) {
	s.with(full, func(r *repo) {
		if r.permissions == nil {
			r.permissions = map[string]string{}
		}
		if permission == "" {
			delete(r.permissions, login)
			return
		}
		r.permissions[login] = permission
	})
}

// AddEvent adds an event of type ("IssuesEvent") with payload to repository full's event
// feed and returns its id.
func (s *Server) AddEvent(full, typ string, payload map[string]any) string {
	var id string
	s.with(full, func(r *repo) {
		s.nextID++
		id = strconv.FormatInt(9000000000+s.nextID, 10)
		r.events = append(r.events, map[string]any{"id": id, "type": typ, "payload": payload, "public": true,
			"repo": map[string]any{"name": full}, "created_at": epoch.Format(time.RFC3339)})
	})
	return id
}

// SetRepoOptions changes a repository's settings.
func (s *Server) SetRepoOptions(full string, o RepoOptions) {
	s.with(full, func(r *repo) { r.description, r.private, r.hidden = o.Description, o.Private, o.Hidden })
}

func (s *Server) newRepo(owner, name string) *repo {
	s.nextID++
	r := &repo{id: s.nextID, owner: owner, name: name, defaultBranch: "main", created: epoch,
		refs: map[string]string{}, git: newGitStore(), issues: map[int]*issue{}, nextNum: 1, nextComment: 500, deps: map[int][]int{},
		checkRuns: map[string][]CheckRun{}, statuses: map[string][]Status{}, ruled: map[string]bool{}, pending: map[int]*update{}}
	s.repos[owner+"/"+name] = r
	return r
}

// with runs fn on repository full under the lock; it panics when there is none.
func (s *Server) with(full string, fn func(r *repo)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repos[full]
	if r == nil {
		panic(fmt.Sprintf("%v: %q", errNoRepo, full))
	}
	fn(r)
}

// Commit writes files on top of branch (a new root commit when the branch does not exist)
// and moves the branch to it; it returns the commit's sha. A value is the file's content,
// or Delete, SymlinkPrefix+target, or Submodule(sha); a path ending in ".sh" is
// executable (mode 100755).
func (s *Server) Commit(full, branch string, files map[string]string) string {
	var sha string
	s.with(full, func(r *repo) {
		parent := r.refs["refs/heads/"+branch]
		sha = r.commit(parent, files, "change on "+branch)
		r.refs["refs/heads/"+branch] = sha
	})
	return sha
}

func (r *repo) commit(parent string, files map[string]string, msg string) string {
	flat := map[string]entry{}
	var parents []string
	if parent != "" {
		flat = r.git.flatten(r.git.commits[parent].tree)
		parents = []string{parent}
	}
	for p, content := range files {
		switch {
		case content == Delete:
			delete(flat, p)
		case strings.HasPrefix(content, submodulePrefix):
			flat[p] = entry{mode: "160000", typ: "commit", sha: strings.TrimPrefix(content, submodulePrefix)}
		case strings.HasPrefix(content, SymlinkPrefix):
			flat[p] = entry{mode: "120000", typ: "blob", sha: r.git.putBlob([]byte(strings.TrimPrefix(content, SymlinkPrefix)))}
		case strings.HasSuffix(p, ".sh"):
			flat[p] = entry{mode: "100755", typ: "blob", sha: r.git.putBlob([]byte(content))}
		default:
			flat[p] = entry{mode: "100644", typ: "blob", sha: r.git.putBlob([]byte(content))}
		}
	}
	return r.git.putCommit(r.git.build(flat), parents, msg, sig{"Seed", "seed@example.com"})
}

// Branch is the commit branch points at, "" when there is no such branch.
func (s *Server) Branch(full, branch string) string {
	var sha string
	s.with(full, func(r *repo) { sha = r.refs["refs/heads/"+branch] })
	return sha
}

// Branches maps every branch of a repository to its commit.
func (s *Server) Branches(full string) map[string]string {
	out := map[string]string{}
	s.with(full, func(r *repo) {
		for ref, sha := range r.refs {
			if b, ok := strings.CutPrefix(ref, "refs/heads/"); ok {
				out[b] = sha
			}
		}
	})
	return out
}

// SetBranch points branch at commit sha, creating the branch when needed.
func (s *Server) SetBranch(full, branch, sha string) {
	s.with(full, func(r *repo) {
		if r.git.commits[sha] == nil {
			panic(fmt.Sprintf("fakegithub: SetBranch(%q, %q): no commit %s", full, branch, sha))
		}
		r.refs["refs/heads/"+branch] = sha
	})
}

// Tag adds a lightweight or annotated tag of commit.
func (s *Server) Tag(full, name, commit string, annotated bool) {
	s.with(full, func(r *repo) {
		sha := commit
		if annotated {
			sha = hash("tag " + name + commit)
			r.git.tags[sha] = &gitTag{sha: sha, name: name, object: commit, objectType: "commit"}
		}
		r.refs["refs/tags/"+name] = sha
	})
}

// CommitInfo is commit sha of a repository; false when there is none.
func (s *Server) CommitInfo(full, sha string) (Commit, bool) {
	var c Commit
	var ok bool
	s.with(full, func(r *repo) {
		gc := r.git.commits[sha]
		if gc == nil {
			return
		}
		ok = true
		c = Commit{SHA: gc.sha, Tree: gc.tree, Parents: slices.Clone(gc.parents), Message: gc.message,
			Author: Signature{gc.author.name, gc.author.email}, Time: gc.time}
	})
	return c, ok
}

// Files maps every path of a commit (or tree) to its entry; nil when there is none.
func (s *Server) Files(full, sha string) map[string]File {
	var out map[string]File
	s.with(full, func(r *repo) { out = r.files(sha) })
	return out
}

func (r *repo) files(sha string) map[string]File {
	tree := r.git.treeOf(sha)
	if tree == "" {
		return nil
	}
	out := map[string]File{}
	for p, e := range r.git.flatten(tree) {
		f := File{Mode: e.mode, SHA: e.sha}
		if e.typ == "blob" {
			f.Content = string(r.git.blobs[e.sha])
		}
		out[p] = f
	}
	return out
}

// Tarball is the gzipped archive GitHub serves of a commit.
func (s *Server) Tarball(full, commit string) []byte {
	var out []byte
	s.with(full, func(r *repo) {
		if r.git.commits[commit] != nil {
			out = r.git.tarball(r.owner, r.name, commit)
		}
	})
	return out
}

// AddIssue opens an issue with is's title, body, labels and blockers (issue numbers,
// registered with the dependencies API); it returns its number. Issues and pull requests
// share one number sequence.
func (s *Server) AddIssue(full string, is Issue) int {
	var n int
	s.with(full, func(r *repo) {
		for _, b := range is.BlockedBy {
			if r.issues[b] == nil {
				panic(fmt.Sprintf("fakegithub: AddIssue: blocker #%d of %q does not exist", b, full))
			}
		}
		x := s.newIssue(r, is.Title, is.Body, slices.Clone(is.Labels))
		if len(is.BlockedBy) > 0 {
			r.deps[x.number] = slices.Clone(is.BlockedBy)
		}
		n = x.number
	})
	return n
}

// SetBlockedBy replaces the blockers of issue n (through the dependencies API).
func (s *Server) SetBlockedBy(full string, n int, blockers ...int) {
	s.with(full, func(r *repo) { r.deps[n] = slices.Clone(blockers) })
}

// BlockedBy is what the dependencies API has blocking issue n.
func (s *Server) BlockedBy(full string, n int) []int {
	var out []int
	s.with(full, func(r *repo) { out = slices.Clone(r.deps[n]) })
	return out
}

// Issue is issue (or pull request) n; false when there is none.
func (s *Server) Issue(full string, n int) (Issue, bool) {
	var out Issue
	var ok bool
	s.with(full, func(r *repo) {
		is := r.issues[n]
		if is == nil {
			return
		}
		ok = true
		out = Issue{Number: is.number, Title: is.title, Body: is.body, State: is.state, Labels: slices.Clone(is.labels),
			BlockedBy: slices.Clone(r.deps[n])}
		for _, c := range is.commentList {
			out.Comments = append(out.Comments, c["body"].(string))
		}
		if p := is.pull; p != nil {
			out.Pull = &Pull{Head: p.head, Base: p.base, HeadSHA: s.headOf(r, is), Draft: p.draft, Merged: p.merged, MergeCommitSHA: p.mergeSHA}
		}
	})
	return out, ok
}

// Issues lists a repository's issues and pull requests by number.
func (s *Server) Issues(full string) []Issue {
	var nums []int
	s.with(full, func(r *repo) { nums = slices.Sorted(maps.Keys(r.issues)) })
	out := make([]Issue, 0, len(nums))
	for _, n := range nums {
		is, _ := s.Issue(full, n)
		out = append(out, is)
	}
	return out
}

// SetMergeable forces what pull request n's mergeable says (and whether a merge is
// refused); nil computes it from the changes again.
func (s *Server) SetMergeable(full string, n int, mergeable *bool) {
	s.with(full, func(r *repo) {
		is := r.issues[n]
		if is == nil || is.pull == nil {
			panic(fmt.Sprintf("fakegithub: SetMergeable: no pull request #%d in %q", n, full))
		}
		is.pull.mergeable = mergeable
	})
}
