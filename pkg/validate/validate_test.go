package validate_test

import (
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/validate"
)

// field returns the field an InvalidArgument names in its BadRequest detail ("" for nil).
func field(t *testing.T, err error) string {
	t.Helper()
	if err == nil {
		return ""
	}
	st := status.Convert(err)
	if st.Code() != codes.InvalidArgument {
		t.Fatalf("code = %v (%v), want InvalidArgument", st.Code(), err)
	}
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok && len(br.FieldViolations) > 0 {
			if !strings.HasPrefix(st.Message(), br.FieldViolations[0].Field+": ") {
				t.Errorf("message %q does not start with the field", st.Message())
			}
			return br.FieldViolations[0].Field
		}
	}
	t.Fatalf("no BadRequest detail in %v", err)
	return ""
}

func TestStrings(t *testing.T) {
	t.Parallel()
	labels, _ := structpb.NewStruct(map[string]any{"ok": "fine", "bad": "a\x00b"})
	badKey, _ := structpb.NewStruct(map[string]any{"k\x00": "v"})
	cases := []struct {
		name string
		msg  proto.Message
		want string // field path, "" for valid
	}{
		{"valid", &tasksv1.UpdateTaskRequest{Task: &tasksv1.Task{Title: "héllo", Labels: []string{"a", "b"}}}, ""},
		{"nil", nil, ""},
		{"NUL in a nested field", &tasksv1.UpdateTaskRequest{Task: &tasksv1.Task{Title: "a\x00b"}}, "task.title"},
		{"invalid UTF-8", &tasksv1.UpdateTaskRequest{Task: &tasksv1.Task{Description: "a\xffb"}}, "task.description"},
		{"repeated", &tasksv1.UpdateTaskRequest{Task: &tasksv1.Task{Labels: []string{"a", "b\x00"}}}, "task.labels[1]"},
		{"repeated messages", &tasksv1.BatchCreateTasksRequest{Tasks: []*tasksv1.BatchTask{{Key: "a"}, {Key: "b", Task: &tasksv1.CreateTaskRequest{Repo: "o/\x00"}}}}, "tasks[1].task.repo"},
		{"deeper message", &tasksv1.UpdateTaskRequest{Task: &tasksv1.Task{PullRequest: &typev1.PullRequestRef{Url: "\xc3"}}}, "task.pull_request.url"},
		{"map value", labels, `fields["bad"].string_value`},
		{"map key", badKey, "fields key"},
		{"top level", &tasksv1.GetTaskRequest{Id: "\x00"}, "id"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := field(t, validate.Strings(tc.msg)); got != tc.want {
				t.Errorf("field = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestInvalidUTF8Path: proto.Unmarshal refuses invalid UTF-8 without naming the field;
// InvalidUTF8Path finds it in the raw bytes.
func TestInvalidUTF8Path(t *testing.T) {
	t.Parallel()
	// Marshal valid messages with a placeholder, then corrupt the placeholder's bytes.
	corrupt := func(m proto.Message) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return []byte(strings.ReplaceAll(string(b), "PLACE", "PL\xffCE"))
	}
	item := func(key, repo string) *tasksv1.BatchTask {
		return &tasksv1.BatchTask{Key: key, Task: &tasksv1.CreateTaskRequest{Title: "t", Repo: repo}}
	}
	st, _ := structpb.NewStruct(map[string]any{"a": "x", "b": map[string]any{"c": "PLACE"}})
	cases := []struct {
		name string
		msg  proto.Message
		want string
	}{
		{"nested", &tasksv1.UpdateTaskRequest{Task: &tasksv1.Task{Title: "PLACE"}}, "task.title"},
		{"repeated message", &tasksv1.BatchCreateTasksRequest{Tasks: []*tasksv1.BatchTask{item("a", "o/r"), item("b", "PLACE")}}, "tasks[1].task.repo"},
		{"repeated string", &tasksv1.UpdateTaskRequest{Task: &tasksv1.Task{Labels: []string{"x", "PLACE"}}}, "task.labels[1]"},
		{"map", st, `fields["b"].struct_value.fields["c"].string_value`},
		{"valid", &tasksv1.UpdateTaskRequest{Task: &tasksv1.Task{Title: "fine"}}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := corrupt(tc.msg)
			if tc.want != "" && proto.Unmarshal(b, tc.msg.ProtoReflect().New().Interface()) == nil {
				t.Fatal("corrupted bytes unmarshal: the test does not test anything")
			}
			if got := validate.InvalidUTF8Path(tc.msg.ProtoReflect().Descriptor(), b); got != tc.want {
				t.Errorf("path = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestHelpers(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 201)
	cases := []struct {
		name string
		err  error
		want string // field named, "" for valid
	}{
		{"uuid ok", second(validate.UUID("id", "0B6F3E43-6C1C-4C6B-9B1B-3C7D0F3E0A11", true)), ""},
		{"uuid empty optional", second(validate.UUID("id", "", false)), ""},
		{"uuid empty required", second(validate.UUID("id", "", true)), "id"},
		{"uuid without hyphens", second(validate.UUID("id", "0b6f3e436c1c4c6b9b1b3c7d0f3e0a11", true)), "id"},
		{"repo ok", validate.Repo("repo", "thefold/the-fold.go", true), ""},
		{"repo no slash", validate.Repo("repo", "thefold", true), "repo"},
		{"repo dots", validate.Repo("repo", "../..", true), "repo"},
		{"repo too long", validate.Repo("repo", "o/"+long, true), "repo"},
		{"repo empty optional", validate.Repo("repo", "", false), ""},
		{"text required", second(validate.RequiredText("title", "  ", 10)), "title"},
		{"text too long", second(validate.RequiredText("title", "ééééééééééé", 10)), "title"},
		{"text ok by characters", second(validate.RequiredText("title", "éééééééééé", 10)), ""},
		{"url ok", validate.URL("u", "https://example.com/x"), ""},
		{"url relative", validate.URL("u", "/x"), "u"},
		{"url ftp", validate.URL("u", "ftp://example.com"), "u"},
		{"labels too many", second(validate.Labels("labels", []string{"a", "b", "c"}, 5, 2)), "labels"},
		{"labels too long", second(validate.Labels("labels", []string{"abcdef"}, 5, 2)), "labels"},
		{"labels deduplicated", second(validate.Labels("labels", []string{"a", " a", "", "b"}, 5, 2)), ""},
		{"enum ok", validate.Enum("priority", typev1.Priority_PRIORITY_HIGH, false), ""},
		{"enum unspecified", validate.Enum("priority", typev1.Priority_PRIORITY_UNSPECIFIED, false), "priority"},
		{"enum unspecified allowed", validate.Enum("priority", typev1.Priority_PRIORITY_UNSPECIFIED, true), ""},
		{"enum unknown", validate.Enum("priority", typev1.Priority(99), true), "priority"},
		{"request id ok", validate.RequestID("request_id", "0b6f3e43-6c1c"), ""},
		{"request id space", validate.RequestID("request_id", "a b"), "request_id"},
		{"request id tab", validate.RequestID("request_id", "a\tb"), "request_id"},
		{"request id too long", validate.RequestID("request_id", strings.Repeat("a", 129)), "request_id"},
		{"page size negative", second(validate.PageSize(-1, 50, 200)), "page_size"},
		{"page size too big", second(validate.PageSize(201, 50, 200)), "page_size"},
		{"bad page token", second(validate.DecodePageToken("!!", "v1", 2, "ListX")), "page_token"},
		{"wrong version", second(validate.DecodePageToken(validate.EncodePageToken("v0", "a", "b"), "v1", 2, "ListX")), "page_token"},
		{"wrong part count", second(validate.DecodePageToken(validate.EncodePageToken("v1", "a"), "v1", 2, "ListX")), "page_token"},
	}
	for _, tc := range cases {
		if got := field(t, tc.err); got != tc.want {
			t.Errorf("%s: field = %q (%v), want %q", tc.name, got, tc.err, tc.want)
		}
	}
	if n, _ := validate.PageSize(0, 50, 200); n != 50 {
		t.Errorf("page size 0 = %d, want the default", n)
	}
	if id, _ := validate.UUID("id", "0B6F3E43-6C1C-4C6B-9B1B-3C7D0F3E0A11", true); id != "0b6f3e43-6c1c-4c6b-9b1b-3c7d0f3e0a11" {
		t.Errorf("uuid not canonical: %s", id)
	}
	parts, err := validate.DecodePageToken(validate.EncodePageToken("v1", "123", "abc"), "v1", 2, "ListX")
	if err != nil || len(parts) != 2 || parts[0] != "123" || parts[1] != "abc" {
		t.Errorf("page token round trip = %v %v", parts, err)
	}
	if got, _ := validate.Labels("l", []string{"a", " a", "", "b"}, 5, 2); strings.Join(got, ",") != "a,b" {
		t.Errorf("labels = %v", got)
	}
}

func second[T any](_ T, err error) error { return err }
