package linear_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/thefold/thefold/pkg/fakelinear"
	"github.com/thefold/thefold/pkg/linear"
)

const webhookSecret = "lin_wh_secret_for_tests"

func TestVerifyWebhook(t *testing.T) {
	t.Parallel()
	fake := fakelinear.New()
	team := fake.AddTeam("ENG", "Engineering")
	fake.AddState(team, "Backlog", linear.StateBacklog)
	done := fake.AddState(team, "Done", linear.StateCompleted)
	issue := fake.AddIssue(team, fakelinear.NewIssue{Title: "hook", Priority: 3})
	issue = fake.SetIssueState(issue.ID, done)
	body := fakelinear.WebhookPayload("update", issue)
	sig := fakelinear.SignWebhook(webhookSecret, body)
	now := time.Now()

	cases := []struct {
		name    string
		secret  string
		body    []byte
		sig     string
		now     time.Time
		wantErr error
	}{
		{name: "good signature", secret: webhookSecret, body: body, sig: sig, now: now},
		{name: "wrong secret", secret: "another secret", body: body, sig: sig, now: now, wantErr: linear.ErrBadSignature},
		{name: "tampered body", secret: webhookSecret, body: bytes.Replace(body, []byte(`"update"`), []byte(`"remove"`), 1), sig: sig, now: now, wantErr: linear.ErrBadSignature},
		{name: "signature not hex", secret: webhookSecret, body: body, sig: "sha256=" + sig, now: now, wantErr: linear.ErrBadSignature},
		{name: "no signature", secret: webhookSecret, body: body, now: now, wantErr: linear.ErrBadSignature},
		{name: "stale", secret: webhookSecret, body: body, sig: sig, now: now.Add(linear.WebhookTolerance + time.Second), wantErr: linear.ErrStaleWebhook},
		{name: "from the future", secret: webhookSecret, body: body, sig: sig, now: now.Add(-linear.WebhookTolerance - time.Second), wantErr: linear.ErrStaleWebhook},
		{name: "no timestamp", secret: webhookSecret, body: withoutTimestamp(t, body), sig: fakelinear.SignWebhook(webhookSecret, withoutTimestamp(t, body)), now: now, wantErr: linear.ErrStaleWebhook},
	}
	for _, tc := range cases {
		got, err := linear.VerifyWebhook(tc.secret, tc.body, tc.sig, tc.now)
		if tc.wantErr != nil {
			if !errors.Is(err, tc.wantErr) || got != nil {
				t.Errorf("%s: err = %v, want %v", tc.name, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got.Action != "update" || got.Type != linear.WebhookTypeIssue || got.OrganizationID != fakelinear.OrganizationID ||
			got.URL != issue.URL || got.WebhookID == "" || len(got.UpdatedFrom) != 0 || got.WebhookTimestamp.Sub(now).Abs() > time.Second {
			t.Errorf("%s: payload = %+v", tc.name, got)
		}
	}

	if _, err := linear.VerifyWebhook("", body, fakelinear.SignWebhook("", body), now); err == nil {
		t.Error("an empty secret verified a webhook")
	}
}

// withoutTimestamp is a payload with its webhookTimestamp removed.
func withoutTimestamp(t *testing.T, body []byte) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "webhookTimestamp")
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestWebhookIssueData(t *testing.T) {
	t.Parallel()
	fake := fakelinear.New()
	team := fake.AddTeam("ENG", "Engineering")
	started := fake.AddState(team, "In Progress", linear.StateStarted)
	project := fake.AddProject("Sync")
	cases := []struct {
		name string
		in   fakelinear.NewIssue
	}{
		{name: "in a project", in: fakelinear.NewIssue{Title: "webhook", Description: "body", Priority: 1, StateID: started, ProjectID: project}},
		{name: "in no project", in: fakelinear.NewIssue{Title: "bare", StateID: started}},
	}
	for _, tc := range cases {
		issue := fake.AddIssue(team, tc.in)
		body := fakelinear.WebhookPayload("create", issue)
		payload, err := linear.VerifyWebhook(webhookSecret, body, fakelinear.SignWebhook(webhookSecret, body), time.Now())
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got, err := payload.IssueData()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		want := &linear.IssueData{
			ID: issue.ID, Identifier: issue.Identifier, Title: tc.in.Title, Description: tc.in.Description,
			URL: issue.URL, Priority: tc.in.Priority, UpdatedAt: issue.UpdatedAt,
			State:  linear.WorkflowState{ID: started, Name: "In Progress", Type: linear.StateStarted},
			TeamID: team, ProjectID: tc.in.ProjectID,
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: IssueData (-want +got):\n%s", tc.name, diff)
		}
	}

	other := &linear.WebhookPayload{Type: linear.WebhookTypeComment, Data: json.RawMessage(`{"id":"c"}`)}
	if _, err := other.IssueData(); err == nil {
		t.Error("IssueData of a Comment payload succeeded")
	}
}
