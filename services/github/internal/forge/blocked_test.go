package forge

import (
	"slices"
	"testing"
)

func TestParseBlockedBy(t *testing.T) {
	for _, tc := range []struct {
		body string
		want []int32
	}{
		{"", nil},
		{"Blocked by #3", []int32{3}},
		{"text\n- blocked by: #4, #2 and #4\nDepends on #9", []int32{2, 4, 9}},
		{"see #5 for context", nil},
		{"This is not blocked by #7 in the middle of a sentence.", nil},
		{"blocked by #0", nil},
	} {
		if got := ParseBlockedBy(tc.body); !slices.Equal(got, tc.want) {
			t.Errorf("ParseBlockedBy(%q) = %v, want %v", tc.body, got, tc.want)
		}
	}
}

func TestWithBlockedBy(t *testing.T) {
	body := "Fix the login.\n\nBlocked by #3\n\nMore text."
	got := WithBlockedBy(body, []int32{5, 2, 5})
	if want := "Fix the login.\n\nMore text.\n\nBlocked by #2, #5"; got != want {
		t.Fatalf("WithBlockedBy = %q, want %q", got, want)
	}
	if back := ParseBlockedBy(got); !slices.Equal(back, []int32{2, 5}) {
		t.Fatalf("round trip = %v", back)
	}
	if got := WithBlockedBy(got, nil); got != "Fix the login.\n\nMore text." {
		t.Fatalf("clearing = %q", got)
	}
	if got := WithBlockedBy("", []int32{1}); got != "Blocked by #1" {
		t.Fatalf("empty body = %q", got)
	}
}
