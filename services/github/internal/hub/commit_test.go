package hub

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/thefold/thefold/pkg/errs"
	"github.com/thefold/thefold/pkg/fakegithub"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/services/github/internal/forge"
)

func TestCreateBranch(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.AddRepo("octo/app", appFiles)
	f.AddRepo("octo/empty", nil)
	first := f.Branch("octo/app", "main")
	second := f.Commit("octo/app", "main", map[string]string{"x": "x"})
	p := f.provider(t)

	sha, created, err := p.CreateBranch(t.Context(), "octo/app", "thefold/task-1", first, forge.Actor{})
	if err != nil || !created || sha != first {
		t.Fatalf("CreateBranch = %s %v %v", sha, created, err)
	}
	// Again, from elsewhere: returned as it is, never moved.
	sha, created, err = p.CreateBranch(t.Context(), "octo/app", "thefold/task-1", second, forge.Actor{})
	if err != nil || created || sha != first {
		t.Errorf("second CreateBranch = %s %v %v", sha, created, err)
	}
	if got := f.Branch("octo/app", "thefold/task-1"); got != first {
		t.Errorf("branch moved to %s", got)
	}
	_, _, err = p.CreateBranch(t.Context(), "octo/app", "other", strings.Repeat("0", 40), forge.Actor{})
	wantErr(t, err, errs.ErrNotFound)
	_, _, err = p.CreateBranch(t.Context(), "octo/empty", "b", first, forge.Actor{})
	wantErr(t, err, errs.ErrFailedPrecondition)

	// Created by someone else between the check and the create.
	f.SetHook(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git/refs") {
			f.SetBranch("octo/app", "race", second)
		}
		return false
	})
	sha, created, err = p.CreateBranch(t.Context(), "octo/app", "race", first, forge.Actor{})
	if err != nil || created || sha != second {
		t.Errorf("racing CreateBranch = %s %v %v", sha, created, err)
	}
}

func fc(path string, action typev1.FileAction, content string) *typev1.FileChange {
	return &typev1.FileChange{Path: path, Action: action, Content: content}
}

const (
	create = typev1.FileAction_FILE_ACTION_CREATE
	modify = typev1.FileAction_FILE_ACTION_MODIFY
	del    = typev1.FileAction_FILE_ACTION_DELETE
)

func TestCommit(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.AddRepo("octo/app", appFiles)
	parent := f.Branch("octo/app", "main")
	p := f.provider(t)

	edit := fc("src/main.go", modify, "")
	edit.Edits = []*typev1.Edit{{OldText: "func main() {}", NewText: "func main() {\n\tprintln(1)\n}"}}
	tool := fc("bin/tool", create, "#!/bin/sh\n")
	tool.Executable = true
	res, err := p.Commit(t.Context(), forge.CommitSpec{
		Repo: "octo/app", Branch: "main", Message: "change things", ExpectedParent: parent,
		Files: []*typev1.FileChange{
			fc("docs/new.md", create, "hello\nworld\n"),
			edit,
			fc("README.md", del, ""),
			fc("src/util/strings.go", modify, "package util\n\n// X is x.\nconst X = 1\n"),
			tool,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.CommitSha != f.Branch("octo/app", "main") || res.ParentSha != parent || res.Branch != "main" || res.Replayed {
		t.Errorf("Commit = %v", res)
	}
	// new.md +2, main.go +3 -1, README.md -1, strings.go +3, tool +1.
	if s := res.Stats; s == nil || s.FilesChanged != 5 || s.Additions != 9 || s.Deletions != 2 {
		t.Errorf("stats = %v", res.Stats)
	}
	c, _ := f.CommitInfo("octo/app", res.CommitSha)
	if c.Message != "change things" || len(c.Parents) != 1 || c.Parents[0] != parent ||
		c.Author != (fakegithub.Signature{Name: "TheFold", Email: "thefold@users.noreply.github.com"}) {
		t.Errorf("commit = %+v", c)
	}
	flat := f.Files("octo/app", res.CommitSha)
	if _, ok := flat["README.md"]; ok {
		t.Error("README.md not deleted")
	}
	if got := flat["src/main.go"].Content; got != "package main\n\nfunc main() {\n\tprintln(1)\n}\n" {
		t.Errorf("edited main.go = %q", got)
	}
	if flat["bin/tool"].Mode != "100755" || flat["docs/new.md"].Mode != "100644" {
		t.Errorf("modes: %v", flat)
	}
	if flat["logo.png"] != f.Files("octo/app", parent)["logo.png"] {
		t.Error("an untouched file changed")
	}

	// What GitHub was sent: base64 blobs, a tree on the parent's tree, a non-forced update.
	for _, r := range f.requests("POST", "/git/blobs") {
		var b struct{ Encoding string }
		_ = json.Unmarshal(r.Body, &b)
		if b.Encoding != "base64" {
			t.Errorf("blob encoding = %q", b.Encoding)
		}
	}
	trees := f.requests("POST", "/git/trees")
	var tree struct {
		BaseTree string `json:"base_tree"`
		Tree     []map[string]any
	}
	if len(trees) != 1 || json.Unmarshal(trees[0].Body, &tree) != nil {
		t.Fatalf("tree requests = %v", trees)
	}
	if pc, _ := f.CommitInfo("octo/app", parent); pc.Tree == "" || tree.BaseTree != pc.Tree {
		t.Errorf("base_tree = %q, want the parent's tree %q", tree.BaseTree, pc.Tree)
	}
	for _, e := range tree.Tree {
		if e["path"] == "README.md" {
			if sha, ok := e["sha"]; !ok || sha != nil {
				t.Errorf("delete entry = %v, want sha null", e)
			}
		}
	}
	patches := f.requests("PATCH", "/git/refs/heads/main")
	if len(patches) != 1 || !strings.Contains(string(patches[0].Body), `"force":false`) {
		t.Errorf("ref updates = %v, want one with force false", patches)
	}

	// An author of the caller's.
	res2, err := p.Commit(t.Context(), forge.CommitSpec{Repo: "octo/app", Branch: "main", Message: "m",
		Author: forge.Signature{Name: "Ada", Email: "ada@example.com"}, Files: []*typev1.FileChange{fc("a", create, "a\n")}})
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := f.CommitInfo("octo/app", res2.CommitSha); c.Author != (fakegithub.Signature{Name: "Ada", Email: "ada@example.com"}) {
		t.Errorf("author = %v", c.Author)
	}
}

func TestCommitRefusals(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.AddRepo("octo/app", appFiles)
	head := f.Branch("octo/app", "main")
	p := f.provider(t)
	spec := func(files ...*typev1.FileChange) forge.CommitSpec {
		return forge.CommitSpec{Repo: "octo/app", Branch: "main", Message: "m", Files: files}
	}

	s := spec(fc("x", create, "x"))
	s.ExpectedParent = strings.Repeat("1", 40)
	_, err := p.Commit(t.Context(), s)
	wantErr(t, err, errs.ErrConflict)
	if n := len(f.requests("POST", "/git/")); n != 0 {
		t.Errorf("a stale parent still wrote %d objects", n)
	}

	bad := fc("src/main.go", modify, "")
	bad.Edits = []*typev1.Edit{{OldText: "func nope()", NewText: "x"}}
	_, err = p.Commit(t.Context(), spec(bad))
	wantErr(t, err, errs.ErrFailedPrecondition)
	if !strings.Contains(err.Error(), `"src/main.go"`) || !strings.Contains(err.Error(), "old_text matches nothing") {
		t.Errorf("edit error text = %q", err)
	}
	binEdit := fc("logo.png", modify, "")
	binEdit.Edits = []*typev1.Edit{{OldText: "PNG", NewText: "x"}}
	_, err = p.Commit(t.Context(), spec(binEdit))
	wantErr(t, err, errs.ErrFailedPrecondition)
	ghost := fc("ghost.go", modify, "")
	ghost.Edits = []*typev1.Edit{{OldText: "a", NewText: "b"}}
	_, err = p.Commit(t.Context(), spec(ghost))
	wantErr(t, err, errs.ErrFailedPrecondition)
	_, err = p.Commit(t.Context(), spec(fc("ghost.go", del, "")))
	wantErr(t, err, errs.ErrFailedPrecondition)

	s = spec(fc("x", create, "x"))
	s.Branch = "nope"
	_, err = p.Commit(t.Context(), s)
	wantErr(t, err, errs.ErrNotFound)

	if got := f.Branch("octo/app", "main"); got != head {
		t.Fatalf("a refused commit moved main")
	}

	// Someone pushes between our read of the branch and our ref update: GitHub's
	// "not a fast forward" is ABORTED, and their commit stays.
	var pushed sync.Once
	var mu sync.Mutex // the hook runs on the server's goroutine
	var theirs string
	f.SetHook(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodPatch {
			pushed.Do(func() {
				sha := f.Commit("octo/app", "main", map[string]string{"theirs.txt": "t"})
				mu.Lock()
				theirs = sha
				mu.Unlock()
			})
		}
		return false
	})
	_, err = p.Commit(t.Context(), spec(fc("mine.txt", create, "m")))
	wantErr(t, err, errs.ErrConflict)
	wantPublic(t, err, "fast forward")
	mu.Lock()
	defer mu.Unlock()
	if got := f.Branch("octo/app", "main"); got != theirs {
		t.Errorf("main = %s, want their commit %s kept", got, theirs)
	}
}
