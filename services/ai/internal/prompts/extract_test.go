package prompts

import (
	"strings"
	"testing"
)

func TestExtractJSON(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		in   string
		want string
		err  bool
	}{
		{"bare object", `{"a":1}`, `{"a":1}`, false},
		{"surrounding whitespace", "\n  {\"a\": 1}\n", `{"a": 1}`, false},
		{"json fence", "Here it is:\n```json\n{\"a\": [1, 2]}\n```\nDone.", `{"a": [1, 2]}`, false},
		{"plain fence", "```\n{\"a\":true}\n```", `{"a":true}`, false},
		{"fence with backticks inside a string", "```json\n{\"content\": \"```go\\nx\\n```\"}\n```", "{\"content\": \"```go\\nx\\n```\"}", false},
		{"second fence holds the JSON", "```go\nfmt.Println()\n```\nand\n```json\n{\"b\":2}\n```", `{"b":2}`, false},
		{"prose around", `Sure! The answer is {"a": {"b": 2}} — hope it helps.`, `{"a": {"b": 2}}`, false},
		{"braces in strings", `Result: {"code": "func f() { if x { return } }", "n": "}"} ok`, `{"code": "func f() { if x { return } }", "n": "}"}`, false},
		{"escaped quote in string", `x {"s": "a \"}\" b"} y`, `{"s": "a \"}\" b"}`, false},
		{"prose braces before the JSON", `Use {braces} like this: {"a":1}`, `{"a":1}`, false},
		{"unclosed fence", "```json\n{\"a\":1}", `{"a":1}`, false},
		{"none", "I cannot help with that.", "", true},
		{"empty", "   ", "", true},
		{"cut off", `{"a": "b`, "", true},
		{"array is not an object", `[1,2]`, "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, err := ExtractJSON(c.in)
			if c.err {
				if err == nil {
					t.Fatalf("ExtractJSON(%q) = %q, want an error", c.in, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("ExtractJSON(%q): %v", c.in, err)
			}
			if string(got) != c.want {
				t.Errorf("ExtractJSON(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
}

// What models get wrong inside JSON strings is repaired; what cannot be repaired is
// reported with its position.
func TestExtractJSONLenient(t *testing.T) {
	t.Parallel()
	got, err := ExtractJSON("{\"content\": \"func f() {\n\treturn re.MustCompile(\"\\d+\")\n}\"}")
	if err == nil {
		t.Fatalf("an unescaped quote inside a string cannot be repaired, got %q", got)
	}
	cases := []struct{ name, in, want string }{
		{"raw tab and newline", "{\"content\": \"func f() {\n\treturn 1\n}\"}", `{"content": "func f() {\u000a\u0009return 1\u000a}"}`},
		{"backslash before a letter JSON has no escape for", `{"re": "\d+\.go"}`, `{"re": "\\d+\\.go"}`},
		{"valid escapes kept", "```json\n{\"a\": \"x\\ty\\n\\\"q\\\" \\u00e9\t\"}\n```", `{"a": "x\ty\n\"q\" \u00e9\u0009"}`},
	}
	for _, c := range cases {
		got, err := ExtractJSON(c.in)
		if err != nil || string(got) != c.want {
			t.Errorf("%s: ExtractJSON = %s, %v; want %s", c.name, got, err, c.want)
		}
	}
	errCases := []struct{ name, in, want string }{
		{"position of a missing comma", "{\n  \"a\": 1\n  \"b\": 2\n}", `line 3, column 3`},
		{"cut off", "{\"a\": [1, 2", "not closed"},
	}
	for _, c := range errCases {
		_, err := ExtractJSON(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to contain %q", c.name, err, c.want)
		}
	}
}
