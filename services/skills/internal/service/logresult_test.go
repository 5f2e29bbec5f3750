package service_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/thefold/thefold/pkg/auth"
	skillsv1 "github.com/thefold/thefold/pkg/gen/thefold/skills/v1"
	"github.com/thefold/thefold/pkg/grpctest"
)

// counts is a skill's success and failure counts.
func (e *env) counts(t *testing.T, id string) (int64, int64) {
	t.Helper()
	resp, err := e.client.GetSkill(e.alice, &skillsv1.GetSkillRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetSkill().GetSuccessCount(), resp.GetSkill().GetFailureCount()
}

func (e *env) askers() []string {
	e.agents.mu.Lock()
	defer e.agents.mu.Unlock()
	return slices.Clone(e.agents.askers)
}

// Skill scores are shared by every user: only the agent service, acting for a job's owner,
// logs results. A person's token (an admin's too), an API key's and another service's are
// PERMISSION_DENIED, saying why, before the job is even looked up, and move nothing.
func TestLogResultOnlyFromTheAgent(t *testing.T) {
	t.Parallel()
	e := start(t)
	sk := e.create(t, inject("security-review", "Review for security.", 50, nil))
	job := e.job("alice")
	keyTok, _, err := e.grpc.Signer.IssueExtra("alice", []string{auth.RoleUser}, time.Hour,
		auth.Extra{APIKeyID: "key-1", Scopes: []string{"*:write"}})
	if err != nil {
		t.Fatal(err)
	}
	apiKey := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+keyTok)
	cases := []struct {
		name string
		ctx  context.Context
		want string
	}{
		{"member", e.alice, "not with a person's token"},
		{"admin", e.admin, "not with a person's token"},
		{"api key", apiKey, "not with a person's token"},
		{"builder for the owner", e.grpc.ServiceContext(t, "builder", "alice"), "not by builder"},
	}
	for _, tc := range cases {
		for range 3 { // a loop of failures
			_, err := e.client.LogResult(tc.ctx, &skillsv1.LogResultRequest{JobId: job, SkillIds: []string{sk.GetId()}, Success: false})
			grpctest.WantCode(t, err, codes.PermissionDenied, "agent", tc.want)
		}
	}
	if s, f := e.counts(t, sk.GetId()); s != 0 || f != 0 {
		t.Fatalf("refused calls moved the counts to %d/%d", s, f)
	}
	if got := e.askers(); len(got) != 0 {
		t.Fatalf("the agent was asked for the job by %v; refused callers must not reach it", got)
	}
	// The agent acting for the owner is accepted, and asked the agent service as itself
	// acting for the owner (its token forwarded).
	if _, err := e.client.LogResult(e.agent, &skillsv1.LogResultRequest{JobId: job, SkillIds: []string{sk.GetId()}, Success: true}); err != nil {
		t.Fatal(err)
	}
	if got := e.askers(); !slices.Equal(got, []string{"agent/alice"}) {
		t.Fatalf("GetJob callers %v, want the agent acting for alice", got)
	}
	if s, f := e.counts(t, sk.GetId()); s != 1 || f != 0 {
		t.Fatalf("counts %d/%d, want 1/0", s, f)
	}
}

// The job must exist and be the owner's: the agent acting for alice cannot log a result
// for bob's job or for a job that does not exist (NOT_FOUND, nothing moves); task_id, when
// given, must be the job's; an agent service that is down is UNAVAILABLE.
func TestLogResultNeedsTheOwnersJob(t *testing.T) {
	t.Parallel()
	e := start(t)
	sk := e.create(t, inject("security-review", "Review for security.", 50, nil))
	bobs := e.job("bob")
	for _, job := range []string{bobs, "0b7e3a52-8d1c-4f7a-9a55-2f0d3c1e9b44"} {
		_, err := e.client.LogResult(e.agent, &skillsv1.LogResultRequest{JobId: job, SkillIds: []string{sk.GetId()}, Success: false})
		grpctest.WantCode(t, err, codes.NotFound, "job", job)
	}
	if s, f := e.counts(t, sk.GetId()); s != 0 || f != 0 {
		t.Fatalf("counts %d/%d after refused jobs", s, f)
	}
	// Bob's job, logged by the agent acting for bob, counts.
	if _, err := e.client.LogResult(e.grpc.ServiceContext(t, "agent", "bob"), &skillsv1.LogResultRequest{JobId: bobs, SkillIds: []string{sk.GetId()}, Success: false}); err != nil {
		t.Fatal(err)
	}
	if s, f := e.counts(t, sk.GetId()); s != 0 || f != 1 {
		t.Fatalf("counts %d/%d, want 0/1", s, f)
	}
	// A task that is not the job's.
	job := e.job("alice")
	_, err := e.client.LogResult(e.agent, &skillsv1.LogResultRequest{JobId: job, TaskId: "6f1c2d3e-4b5a-4c6d-8e7f-9a0b1c2d3e4f", SkillIds: []string{sk.GetId()}, Success: true})
	grpctest.WantInvalid(t, err, "task_id")
	// The agent service down: the result cannot be checked, so it is not counted.
	e.agents.mu.Lock()
	e.agents.down = true
	e.agents.mu.Unlock()
	_, err = e.client.LogResult(e.agent, &skillsv1.LogResultRequest{JobId: job, SkillIds: []string{sk.GetId()}, Success: true})
	grpctest.WantCode(t, err, codes.Unavailable)
	if s, f := e.counts(t, sk.GetId()); s != 0 || f != 1 {
		t.Fatalf("counts %d/%d, want 0/1", s, f)
	}
}

// A job's result counts once per skill: a retried or replayed LogResult (concurrent, with
// the job id spelled in upper case, or with the opposite verdict) moves nothing again.
func TestLogResultCountsAJobOnce(t *testing.T) {
	t.Parallel()
	e := start(t)
	a := e.create(t, inject("a", "Advice A.", 50, nil))
	b := e.create(t, inject("b", "Advice B.", 50, nil))
	job := e.job("alice")
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			_, err := e.client.LogResult(e.agent, &skillsv1.LogResultRequest{JobId: job, SkillIds: []string{a.GetId(), b.GetId()}, Success: true, QualityScore: 9})
			errc <- err
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			t.Fatal(err)
		}
	}
	replays := []*skillsv1.LogResultRequest{
		{JobId: strings.ToUpper(job), SkillIds: []string{a.GetId()}, Success: true},
		{JobId: job, SkillIds: []string{b.GetId(), a.GetId()}, Success: false},
	}
	for _, r := range replays {
		resp, err := e.client.LogResult(e.agent, r)
		if err != nil {
			t.Fatal(err)
		}
		for _, sc := range resp.GetScores() {
			if sc.GetSuccessCount() != 1 || sc.GetFailureCount() != 0 || sc.GetConfidence() != 1 {
				t.Fatalf("replay %v moved %s to %v", r, sc.GetSkillId(), sc)
			}
		}
	}
	for _, id := range []string{a.GetId(), b.GetId()} {
		if s, f := e.counts(t, id); s != 1 || f != 0 {
			t.Fatalf("skill %s counts %d/%d, want 1/0", id, s, f)
		}
	}
	// The store keeps one spelling of a job (migration 00002): a result under a job id that
	// is not a canonical UUID is refused by the database itself.
	_, err := e.pool.Exec(context.Background(), `INSERT INTO skill_results (job_id, skill_id, success, owner_id) VALUES ($1, $2, true, 'alice')`,
		strings.ToUpper(job), a.GetId())
	if err == nil || !strings.Contains(err.Error(), "skill_results_job_id_canonical") {
		t.Fatalf("non-canonical job id stored: %v", err)
	}
}
