package protoenum

import (
	"testing"

	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

func TestNameAndParse(t *testing.T) {
	const prefix = "FILE_ACTION_"
	for _, v := range []typev1.FileAction{typev1.FileAction_FILE_ACTION_CREATE, typev1.FileAction_FILE_ACTION_MODIFY, typev1.FileAction_FILE_ACTION_DELETE} {
		name := Name(v, prefix)
		if name == "" || name != lower(v.String()[len(prefix):]) {
			t.Errorf("Name(%v) = %q", v, name)
		}
		if got := Parse[typev1.FileAction](name, prefix, typev1.FileAction_value); got != v {
			t.Errorf("Parse(%q) = %v, want %v", name, got, v)
		}
	}
	if got := Name(typev1.FileAction_FILE_ACTION_UNSPECIFIED, prefix); got != "" {
		t.Errorf("Name(UNSPECIFIED) = %q, want empty", got)
	}
	if got := Name(typev1.FileAction(99), prefix); got != "" {
		t.Errorf("Name(99) = %q, want empty", got)
	}
	if got := Parse[typev1.FileAction]("no-such", prefix, typev1.FileAction_value); got != 0 {
		t.Errorf("Parse(unknown) = %v, want 0", got)
	}
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
