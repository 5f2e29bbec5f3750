package fakellm

import (
	"strings"
	"testing"
)

// Text reads a recorded body as the model does: every string, unescaped.
func TestRecordedText(t *testing.T) {
	r := Recorded{Body: []byte(`{"system":[{"text":"a \u003cdata kind=\"x\"\u003e"}],"messages":[{"content":"line\none"}],"max_tokens":5}`)}
	got := r.Text()
	for _, want := range []string{`a <data kind="x">`, "line\none"} {
		if !strings.Contains(got, want) {
			t.Errorf("Text() = %q, want it to hold %q", got, want)
		}
	}
	if (Recorded{Body: []byte(`"not an object"`)}).Text() != "not an object" || (Recorded{Body: []byte("raw")}).Text() != "raw" {
		t.Error("a body that is a JSON string, or not JSON, is itself")
	}
}
