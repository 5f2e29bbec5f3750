package service_test

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	builderv1 "github.com/thefold/thefold/pkg/gen/thefold/builder/v1"
	"github.com/thefold/thefold/pkg/grpctest"

	"github.com/thefold/thefold/services/builder/internal/store"
)

// AddGuidance appends the person's message with its author and the step running, survives
// the engine's writes of the build, adds nothing again for a retried request_id, and is
// refused once the build is finished.
func TestAddGuidance(t *testing.T) {
	t.Parallel()
	e := start(t)
	c, ctx := e.client, e.alice
	b := e.startBuild(t, ctx, "g1")

	resp, err := c.AddGuidance(ctx, &builderv1.AddGuidanceRequest{BuildId: b.Id, Text: "  use hi  ", RequestId: "guide-1"})
	if err != nil {
		t.Fatal(err)
	}
	if g := resp.Build.Guidance; len(g) != 1 || g[0].Text != "use hi" || g[0].Author != "alice" || g[0].StepNumber != 0 || g[0].CreateTime == nil {
		t.Errorf("guidance after the first message = %v", g)
	}

	// The engine runs step 2 and writes the build: the guidance stays, and the next
	// message names the step.
	lease := "9d9d9d9d-9d9d-4d9d-8d9d-9d9d9d9d9d9d"
	sb, _, ok, err := e.store.Claim(ctx, b.Id, lease, time.Minute)
	if err != nil || !ok {
		t.Fatalf("Claim: %v %v", ok, err)
	}
	sb.Status, sb.CurrentStep = builderv1.BuildStatus_BUILD_STATUS_RUNNING, 2
	if err := e.store.Apply(ctx, lease, store.Change{Build: sb}); err != nil {
		t.Fatal(err)
	}
	resp, err = c.AddGuidance(ctx, &builderv1.AddGuidanceRequest{BuildId: b.Id, Text: "and keep the name"})
	if err != nil {
		t.Fatal(err)
	}
	if g := resp.Build.Guidance; len(g) != 2 || g[1].Text != "and keep the name" || g[1].StepNumber != 2 {
		t.Errorf("guidance after the second message = %v", g)
	}
	if err := e.store.Apply(ctx, lease, store.Change{Build: sb}); err != nil {
		t.Fatal(err)
	}

	// A retry of the first call adds nothing.
	resp, err = c.AddGuidance(ctx, &builderv1.AddGuidanceRequest{BuildId: b.Id, Text: "use hi", RequestId: "guide-1"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.GetBuild(ctx, &builderv1.GetBuildRequest{Id: b.Id})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Build.Guidance) != 2 || len(got.Build.Guidance) != 2 || got.Build.Guidance[0].Text != "use hi" {
		t.Errorf("after a retry: response %v, GetBuild %v; want the two messages", resp.Build.Guidance, got.Build.Guidance)
	}
	fromStore, err := e.store.Guidance(ctx, b.Id)
	if err != nil || len(fromStore) != 2 {
		t.Errorf("store.Guidance = %v, %v", fromStore, err)
	}

	// One LOG event per message added.
	var logs int
	if err := e.store.Pool().QueryRow(ctx, `SELECT count(*) FROM events WHERE stream = $1 AND aggregate_id = $2 AND type = 'log'`,
		store.EventStream, b.Id).Scan(&logs); err != nil {
		t.Fatal(err)
	}
	if logs != 2 {
		t.Errorf("%d LOG events, want 2", logs)
	}

	// Finished: refused, naming the status; a retry of an earlier call still answers.
	sb.Status = builderv1.BuildStatus_BUILD_STATUS_COMPLETED
	if err := e.store.Apply(ctx, lease, store.Change{Build: sb}); err != nil {
		t.Fatal(err)
	}
	_, err = c.AddGuidance(ctx, &builderv1.AddGuidanceRequest{BuildId: b.Id, Text: "too late"})
	grpctest.WantCode(t, err, codes.FailedPrecondition, "completed")
	if resp, err := c.AddGuidance(ctx, &builderv1.AddGuidanceRequest{BuildId: b.Id, Text: "use hi", RequestId: "guide-1"}); err != nil || len(resp.Build.Guidance) != 2 {
		t.Errorf("retry on the finished build = %v, %v", resp, err)
	}

	cancelled := e.startBuild(t, ctx, "g2")
	if _, err := c.CancelBuild(ctx, &builderv1.CancelBuildRequest{Id: cancelled.Id}); err != nil {
		t.Fatal(err)
	}
	_, err = c.AddGuidance(ctx, &builderv1.AddGuidanceRequest{BuildId: cancelled.Id, Text: "too late", RequestId: "guide-2"})
	grpctest.WantCode(t, err, codes.FailedPrecondition, "cancelled")
}
