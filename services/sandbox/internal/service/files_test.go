package service_test

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"

	"github.com/thefold/thefold/services/sandbox/internal/service"
)

func TestFiles(t *testing.T) {
	t.Parallel()
	e := start(t, service.Config{MaxFileBytes: 1 << 10, AllowExtra: []string{"ln"}})
	sb := e.create(t, nil)
	w, err := e.client.WriteFile(e.alice, &sandboxv1.WriteFileRequest{SandboxId: sb.Id, Path: "src/a/b.txt", Content: []byte("hello\n")})
	if err != nil || w.Size != 6 || w.Sha256 != "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03" {
		t.Fatalf("WriteFile: %v %v", w, err)
	}
	if got := e.read(t, sb.Id, "src/a/b.txt"); got != "hello\n" {
		t.Fatalf("read %q", got)
	}
	for i := range 5 {
		e.write(t, sb.Id, fmt.Sprintf("src/f%d.txt", i), "x")
	}
	e.write(t, sb.Id, "node_modules/dep/index.js", "x")

	// Pages of two, recursive, with the ignored dependency folder left out.
	var paths []string
	tok := ""
	for {
		resp, err := e.client.ListFiles(e.alice, &sandboxv1.ListFilesRequest{SandboxId: sb.Id, Recursive: true, PageSize: 2, PageToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range resp.Files {
			paths = append(paths, f.Path)
		}
		if tok = resp.NextPageToken; tok == "" {
			break
		}
		// A token is for the listing it came from.
		_, err = e.client.ListFiles(e.alice, &sandboxv1.ListFilesRequest{SandboxId: sb.Id, PageToken: tok})
		wantCode(t, err, codes.InvalidArgument, "page_token")
	}
	want := "src,src/a,src/a/b.txt,src/f0.txt,src/f1.txt,src/f2.txt,src/f3.txt,src/f4.txt"
	if strings.Join(paths, ",") != want {
		t.Fatalf("listed %v, want %s", paths, want)
	}
	all, err := e.client.ListFiles(e.alice, &sandboxv1.ListFilesRequest{SandboxId: sb.Id, Recursive: true, IncludeIgnored: true})
	if err != nil || len(all.Files) != 11 {
		t.Fatalf("with ignored: %v %v", all, err)
	}

	// Deletes: a missing file, a non-empty directory without and with recursive.
	_, err = e.client.DeleteFile(e.alice, &sandboxv1.DeleteFileRequest{SandboxId: sb.Id, Path: "nope"})
	wantCode(t, err, codes.NotFound)
	_, err = e.client.DeleteFile(e.alice, &sandboxv1.DeleteFileRequest{SandboxId: sb.Id, Path: "src"})
	wantCode(t, err, codes.FailedPrecondition, "recursive")
	if _, err := e.client.DeleteFile(e.alice, &sandboxv1.DeleteFileRequest{SandboxId: sb.Id, Path: "src/f0.txt"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.DeleteFile(e.alice, &sandboxv1.DeleteFileRequest{SandboxId: sb.Id, Path: "src", Recursive: true}); err != nil {
		t.Fatal(err)
	}
	_, err = e.client.ReadFile(e.alice, &sandboxv1.ReadFileRequest{SandboxId: sb.Id, Path: "src/a/b.txt"})
	wantCode(t, err, codes.NotFound)

	// Paths are confined to the workspace.
	if r, err := e.run(t, sb.Id, "ln", "-s", "/etc", "etc-link"); err != nil || r.res.ExitCode != 0 {
		t.Fatalf("ln: %v %v", r, err)
	}
	if r, err := e.run(t, sb.Id, "ln", "-s", "/etc/hostname", "host-file"); err != nil || r.res.ExitCode != 0 {
		t.Fatalf("ln: %v %v", r, err)
	}
	for _, p := range []string{"../outside.txt", "/etc/passwd", "a/../../x", "etc-link/evil", "host-file"} {
		_, err := e.client.WriteFile(e.alice, &sandboxv1.WriteFileRequest{SandboxId: sb.Id, Path: p, Content: []byte("x")})
		wantCode(t, err, codes.InvalidArgument, "path")
	}
	for _, p := range []string{"../../etc/passwd", "/etc/passwd", "etc-link/passwd", "host-file"} {
		_, err := e.client.ReadFile(e.alice, &sandboxv1.ReadFileRequest{SandboxId: sb.Id, Path: p})
		wantCode(t, err, codes.InvalidArgument, "path")
	}
	_, err = e.client.WriteFile(e.alice, &sandboxv1.WriteFileRequest{SandboxId: sb.Id, Path: "big", Content: make([]byte, 2<<10)})
	wantCode(t, err, codes.InvalidArgument, "content")
}

func TestApplyEdits(t *testing.T) {
	t.Parallel()
	e := start(t, service.Config{})
	sb := e.create(t, nil)
	e.write(t, sb.Id, "main.go", "package main\n\nfunc a() int { return 1 }\nfunc b() int { return 1 }\n")
	edit := func(old, new string, n int32) *typev1.Edit {
		return &typev1.Edit{OldText: old, NewText: new, ExpectedCount: n}
	}

	// One edit matching twice, then one matching nothing: refused, the file unchanged.
	_, err := e.client.ApplyEdits(e.alice, &sandboxv1.ApplyEditsRequest{SandboxId: sb.Id, Path: "main.go",
		Edits: []*typev1.Edit{edit("return 1", "return 2", 0)}})
	wantCode(t, err, codes.InvalidArgument, "edits[0]", "2 times")
	_, err = e.client.ApplyEdits(e.alice, &sandboxv1.ApplyEditsRequest{SandboxId: sb.Id, Path: "main.go",
		Edits: []*typev1.Edit{edit("func a", "func aa", 0), edit("func zz", "x", 0)}})
	wantCode(t, err, codes.InvalidArgument, "edits[1]", "matches nothing")
	if got := e.read(t, sb.Id, "main.go"); !strings.Contains(got, "func a()") {
		t.Fatalf("a refused edit changed the file: %q", got)
	}

	// A dry run reports each edit without writing.
	dry, err := e.client.ApplyEdits(e.alice, &sandboxv1.ApplyEditsRequest{SandboxId: sb.Id, Path: "main.go", DryRun: true,
		Edits: []*typev1.Edit{edit("func a", "func aa", 0), edit("return 1", "return 2", 0)}})
	if err != nil || dry.Applied || !dry.Results[0].Ok || dry.Results[1].Ok || dry.Results[1].MatchCount != 2 {
		t.Fatalf("dry run: %v %v", dry, err)
	}

	resp, err := e.client.ApplyEdits(e.alice, &sandboxv1.ApplyEditsRequest{SandboxId: sb.Id, Path: "main.go",
		Edits: []*typev1.Edit{edit("return 1", "return 2", 2), edit("func a", "func aa", 0)}})
	if err != nil || !resp.Applied {
		t.Fatalf("ApplyEdits: %v %v", resp, err)
	}
	want := "package main\n\nfunc aa() int { return 2 }\nfunc b() int { return 2 }\n"
	if got := e.read(t, sb.Id, "main.go"); got != want || resp.Content != want {
		t.Fatalf("after edits %q (response %q)", got, resp.Content)
	}
	_, err = e.client.ApplyEdits(e.alice, &sandboxv1.ApplyEditsRequest{SandboxId: sb.Id, Path: "missing.go", Edits: []*typev1.Edit{edit("a", "b", 0)}})
	wantCode(t, err, codes.NotFound)
}

func TestSnapshotAndDiff(t *testing.T) {
	t.Parallel()
	e := start(t, service.Config{})
	sb := e.create(t, &sandboxv1.CreateSandboxRequest{Archive: tarGz(t, map[string]string{"a.txt": "one\ntwo\nthree\n", "gone.txt": "x\n"})})
	e.write(t, sb.Id, "a.txt", "one\n2\nthree\n")
	e.write(t, sb.Id, "new.txt", "fresh\n")
	if _, err := e.client.DeleteFile(e.alice, &sandboxv1.DeleteFileRequest{SandboxId: sb.Id, Path: "gone.txt"}); err != nil {
		t.Fatal(err)
	}
	d, err := e.client.Diff(e.alice, &sandboxv1.DiffRequest{Id: sb.Id})
	if err != nil {
		t.Fatal(err)
	}
	if d.Base != "initial" || len(d.Files) != 3 || d.Stats.FilesChanged != 3 {
		t.Fatalf("diff %v", d)
	}
	byPath := map[string]*typev1.FileDiff{}
	for _, f := range d.Files {
		byPath[f.Path] = f
	}
	if f := byPath["a.txt"]; f.Action != typev1.FileAction_FILE_ACTION_MODIFY || f.Additions != 1 || f.Deletions != 1 ||
		!strings.Contains(f.UnifiedDiff, "-two\n+2\n") {
		t.Fatalf("a.txt: %v", f)
	}
	if byPath["new.txt"].Action != typev1.FileAction_FILE_ACTION_CREATE || byPath["gone.txt"].Action != typev1.FileAction_FILE_ACTION_DELETE {
		t.Fatalf("diff %v", d.Files)
	}

	snap, err := e.client.Snapshot(e.alice, &sandboxv1.SnapshotRequest{SandboxId: sb.Id, Name: "before-fix-1"})
	if err != nil || snap.Snapshot.FileCount != 2 || snap.Snapshot.TotalBytes != int64(len("one\n2\nthree\n")+len("fresh\n")) {
		t.Fatalf("Snapshot: %v %v", snap, err)
	}
	_, err = e.client.Snapshot(e.alice, &sandboxv1.SnapshotRequest{SandboxId: sb.Id, Name: "before-fix-1"})
	wantCode(t, err, codes.AlreadyExists)
	e.write(t, sb.Id, "new.txt", "fresh\nand more\n")
	d, err = e.client.Diff(e.alice, &sandboxv1.DiffRequest{Id: sb.Id, SnapshotId: snap.Snapshot.Id, ContextLines: 1})
	if err != nil || d.Base != snap.Snapshot.Id || len(d.Files) != 1 || d.Files[0].Path != "new.txt" || d.Files[0].Additions != 1 ||
		!strings.Contains(d.Files[0].UnifiedDiff, "+and more") {
		t.Fatalf("diff against the snapshot: %v %v", d, err)
	}
	// Paths filter; stats_only leaves out the unified diffs.
	d, err = e.client.Diff(e.alice, &sandboxv1.DiffRequest{Id: sb.Id, Paths: []string{"a.txt"}, StatsOnly: true})
	if err != nil || len(d.Files) != 1 || d.Files[0].UnifiedDiff != "" || d.Stats.Additions != 1 {
		t.Fatalf("filtered: %v %v", d, err)
	}
	// Another sandbox's snapshot is not this one's.
	other := e.create(t, nil)
	_, err = e.client.Diff(e.alice, &sandboxv1.DiffRequest{Id: other.Id, SnapshotId: snap.Snapshot.Id})
	wantCode(t, err, codes.NotFound)
}
