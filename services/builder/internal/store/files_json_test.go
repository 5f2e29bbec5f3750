package store

import (
	"fmt"
	"strings"
	"testing"

	builderv1 "github.com/thefold/thefold/pkg/gen/thefold/builder/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// A build's file list is stored as marshalList makes it, also when entries changed in place
// since the last write (the reused JSON must be of the entry as it is now).
func TestMarshalFilesIsTheListAsItIsNow(t *testing.T) {
	b := &Build{BuildJob: &builderv1.BuildJob{}}
	for _, p := range []string{"a.go", "b.go", "c.go"} {
		b.Files = append(b.Files, &builderv1.BuildFile{Path: p, Status: builderv1.BuildFileStatus_BUILD_FILE_STATUS_PENDING})
	}
	check := func(when string) {
		t.Helper()
		want, err := marshalList(b.Files)
		if err != nil {
			t.Fatal(err)
		}
		got, err := b.marshalFiles()
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Fatalf("%s: %s, want %s", when, got, want)
		}
	}
	check("first write")
	check("unchanged")
	b.Files[1].Status = builderv1.BuildFileStatus_BUILD_FILE_STATUS_VALID
	check("an entry changed in place")
	b.Files = append(b.Files, &builderv1.BuildFile{Path: "d.go"})
	b.Files[0].Status = builderv1.BuildFileStatus_BUILD_FILE_STATUS_VALID
	check("an entry added and another changed")
	b.Files = b.Files[:0]
	check("emptied")
}

// fileKey writes out BuildFile's scalar fields by hand: a field added to the message must be
// added there too (or the cached JSON of an entry whose new field changed would be stale).
func TestFileKeyKnowsEveryFieldOfBuildFile(t *testing.T) {
	fields := (&builderv1.BuildFile{}).ProtoReflect().Descriptor().Fields()
	var names []string
	for i := 0; i < fields.Len(); i++ {
		names = append(names, string(fields.Get(i).Name()))
	}
	if want := "path,action,status,attempts,diagnostics"; strings.Join(names, ",") != want {
		t.Fatalf("BuildFile's fields are %v; fileKey knows %s: update it", names, want)
	}
}

// Two entries that differ in any field have different keys, and equal entries equal keys.
func TestFileKeyTellsEntriesApart(t *testing.T) {
	base := func() *builderv1.BuildFile {
		return &builderv1.BuildFile{Path: "a.go", Action: typev1.FileAction_FILE_ACTION_CREATE,
			Status: builderv1.BuildFileStatus_BUILD_FILE_STATUS_VALID, Attempts: 1}
	}
	variants := []*builderv1.BuildFile{base(), {}, {Path: "b.go"}, {Path: "a.g"}}
	for _, change := range []func(*builderv1.BuildFile){
		func(f *builderv1.BuildFile) { f.Path = "a.go\x00" },
		func(f *builderv1.BuildFile) { f.Action = typev1.FileAction_FILE_ACTION_MODIFY },
		func(f *builderv1.BuildFile) { f.Status = builderv1.BuildFileStatus_BUILD_FILE_STATUS_FAILED },
		func(f *builderv1.BuildFile) { f.Attempts = 2 },
		func(f *builderv1.BuildFile) { f.Diagnostics = []*typev1.Diagnostic{{Message: "x"}} },
		func(f *builderv1.BuildFile) { f.Diagnostics = []*typev1.Diagnostic{{Message: "y"}} },
	} {
		f := base()
		change(f)
		variants = append(variants, f)
	}
	seen := map[string]int{}
	for i, f := range variants {
		k, err := fileKey(nil, f)
		if err != nil {
			t.Fatal(err)
		}
		if j, ok := seen[string(k)]; ok {
			t.Errorf("entries %d (%v) and %d (%v) have the same key", j, variants[j], i, f)
		}
		seen[string(k)] = i
	}
	a, _ := fileKey(nil, base())
	b, _ := fileKey(nil, base())
	if string(a) != string(b) {
		t.Error("equal entries have different keys")
	}
}

// BenchmarkMarshalFiles is one write's file list of a 200-file build whose entries, but one,
// are unchanged since the last write (the builder writes it twice per file).
func BenchmarkMarshalFiles(b *testing.B) {
	bd := &Build{BuildJob: &builderv1.BuildJob{}}
	for i := 0; i < 200; i++ {
		bd.Files = append(bd.Files, &builderv1.BuildFile{Path: fmt.Sprintf("pkg/p%d/file%d.go", i/10, i),
			Action: typev1.FileAction_FILE_ACTION_CREATE, Status: builderv1.BuildFileStatus_BUILD_FILE_STATUS_VALID, Attempts: 1})
	}
	bd.Files[7].Diagnostics = []*typev1.Diagnostic{{Message: "unused variable x", Path: "pkg/p0/file7.go", Line: 3}}
	if _, err := bd.marshalFiles(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		bd.Files[i%200].Attempts++
		if _, err := bd.marshalFiles(); err != nil {
			b.Fatal(err)
		}
	}
}
