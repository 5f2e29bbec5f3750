package store

import (
	"testing"

	builderv1 "github.com/thefold/thefold/pkg/gen/thefold/builder/v1"
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
