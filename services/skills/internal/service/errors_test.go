package service_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	skillsv1 "github.com/thefold/thefold/pkg/gen/thefold/skills/v1"
)

// Every RPC answers malformed input with INVALID_ARGUMENT naming the field, and a caller
// without a token with UNAUTHENTICATED.
func TestEveryRPCRefusesMalformedInput(t *testing.T) {
	t.Parallel()
	e := start(t)
	c := e.client
	ok := e.create(t, inject("ok", "Advice.", 50, nil))
	job := e.job("alice")
	tc := func() *skillsv1.TaskContext { return &skillsv1.TaskContext{Description: "x"} }
	zero, neg := int32(0), int32(-5)
	rule := func(r *skillsv1.SkillRule) *skillsv1.Skill {
		return &skillsv1.Skill{Name: "r", Phase: skillsv1.SkillPhase_SKILL_PHASE_POST_RUN, Rules: []*skillsv1.SkillRule{r}}
	}
	cases := []struct {
		rpc, field string
		call       func(ctx context.Context) error
	}{
		{"CreateSkill", "skill", func(ctx context.Context) error {
			_, err := c.CreateSkill(ctx, &skillsv1.CreateSkillRequest{})
			return err
		}},
		{"CreateSkill", "skill.name", func(ctx context.Context) error {
			_, err := c.CreateSkill(ctx, &skillsv1.CreateSkillRequest{Skill: inject("Bad Name", "x", 50, nil)})
			return err
		}},
		{"CreateSkill", "skill.phase", func(ctx context.Context) error {
			_, err := c.CreateSkill(ctx, &skillsv1.CreateSkillRequest{Skill: &skillsv1.Skill{Name: "p", PromptFragment: "x"}})
			return err
		}},
		{"CreateSkill", "skill.prompt_fragment", func(ctx context.Context) error {
			_, err := c.CreateSkill(ctx, &skillsv1.CreateSkillRequest{Skill: inject("p", " ", 50, nil)})
			return err
		}},
		{"CreateSkill", "skill.priority", func(ctx context.Context) error {
			_, err := c.CreateSkill(ctx, &skillsv1.CreateSkillRequest{Skill: inject("p", "x", 101, nil)})
			return err
		}},
		{"CreateSkill", "skill.routing.file_globs[0]", func(ctx context.Context) error {
			_, err := c.CreateSkill(ctx, &skillsv1.CreateSkillRequest{Skill: inject("p", "x", 50, &skillsv1.SkillRouting{FileGlobs: []string{"src/[a-"}})})
			return err
		}},
		{"CreateSkill", "skill.routing.languages[0]", func(ctx context.Context) error {
			_, err := c.CreateSkill(ctx, &skillsv1.CreateSkillRequest{Skill: inject("p", "x", 50, &skillsv1.SkillRouting{Languages: []string{"Go Lang"}})})
			return err
		}},
		{"CreateSkill", "skill.repo", func(ctx context.Context) error {
			sk := inject("p", "x", 50, nil)
			sk.Scope = skillsv1.SkillScope_SKILL_SCOPE_REPO
			_, err := c.CreateSkill(ctx, &skillsv1.CreateSkillRequest{Skill: sk})
			return err
		}},
		{"CreateSkill", "skill.rules[0].pattern", func(ctx context.Context) error {
			_, err := c.CreateSkill(ctx, &skillsv1.CreateSkillRequest{Skill: rule(&skillsv1.SkillRule{Id: "x", Pattern: "a(b"})})
			return err
		}},
		{"CreateSkill", "skill.rules[0].pattern", func(ctx context.Context) error {
			_, err := c.CreateSkill(ctx, &skillsv1.CreateSkillRequest{Skill: rule(&skillsv1.SkillRule{Id: "x", Kind: skillsv1.SkillRuleKind_SKILL_RULE_KIND_DETECTOR, Pattern: "psychic"})})
			return err
		}},
		{"CreateSkill", "skill.rules[0].pattern", func(ctx context.Context) error {
			_, err := c.CreateSkill(ctx, &skillsv1.CreateSkillRequest{Skill: rule(&skillsv1.SkillRule{Id: "x", Kind: skillsv1.SkillRuleKind_SKILL_RULE_KIND_GLOB, Pattern: "/etc/**"})})
			return err
		}},
		{"CreateSkill", "skill.rules[0].id", func(ctx context.Context) error {
			_, err := c.CreateSkill(ctx, &skillsv1.CreateSkillRequest{Skill: rule(&skillsv1.SkillRule{Id: "Has Space", Pattern: "x"})})
			return err
		}},
		{"CreateSkill", "skill.rules", func(ctx context.Context) error {
			sk := inject("p", "x", 50, nil)
			sk.Rules = []*skillsv1.SkillRule{{Id: "x", Pattern: "x"}}
			_, err := c.CreateSkill(ctx, &skillsv1.CreateSkillRequest{Skill: sk})
			return err
		}},
		{"GetSkill", "id", func(ctx context.Context) error {
			_, err := c.GetSkill(ctx, &skillsv1.GetSkillRequest{Id: "nope"})
			return err
		}},
		{"ListSkills", "page_token", func(ctx context.Context) error {
			_, err := c.ListSkills(ctx, &skillsv1.ListSkillsRequest{PageToken: "zz"})
			return err
		}},
		{"ListSkills", "page_size", func(ctx context.Context) error {
			_, err := c.ListSkills(ctx, &skillsv1.ListSkillsRequest{PageSize: 201})
			return err
		}},
		{"ListSkills", "phase", func(ctx context.Context) error {
			_, err := c.ListSkills(ctx, &skillsv1.ListSkillsRequest{Phase: 9})
			return err
		}},
		{"UpdateSkill", "update_mask", func(ctx context.Context) error {
			_, err := c.UpdateSkill(ctx, &skillsv1.UpdateSkillRequest{Id: ok.GetId(), Skill: &skillsv1.Skill{}})
			return err
		}},
		{"UpdateSkill", "update_mask", func(ctx context.Context) error {
			_, err := c.UpdateSkill(ctx, &skillsv1.UpdateSkillRequest{Id: ok.GetId(), Skill: &skillsv1.Skill{}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"success_count"}}})
			return err
		}},
		{"UpdateSkill", "skill.priority", func(ctx context.Context) error {
			_, err := c.UpdateSkill(ctx, &skillsv1.UpdateSkillRequest{Id: ok.GetId(), Skill: &skillsv1.Skill{Priority: -1}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"priority"}}})
			return err
		}},
		{"DeleteSkill", "id", func(ctx context.Context) error {
			_, err := c.DeleteSkill(ctx, &skillsv1.DeleteSkillRequest{})
			return err
		}},
		{"ResolveSkills", "context", func(ctx context.Context) error {
			_, err := c.ResolveSkills(ctx, &skillsv1.ResolveSkillsRequest{})
			return err
		}},
		{"ResolveSkills", "token_budget", func(ctx context.Context) error {
			_, err := c.ResolveSkills(ctx, &skillsv1.ResolveSkillsRequest{Context: &skillsv1.TaskContext{Description: "x"}, TokenBudget: &zero})
			return err
		}},
		{"ResolveSkills", "token_budget", func(ctx context.Context) error {
			_, err := c.ResolveSkills(ctx, &skillsv1.ResolveSkillsRequest{Context: &skillsv1.TaskContext{Description: "x"}, TokenBudget: &neg})
			return err
		}},
		{"ResolveSkills", "context.file_paths[0]", func(ctx context.Context) error {
			_, err := c.ResolveSkills(ctx, &skillsv1.ResolveSkillsRequest{Context: &skillsv1.TaskContext{FilePaths: []string{"../etc/passwd"}}})
			return err
		}},
		{"ResolveSkills", "context.repo", func(ctx context.Context) error {
			_, err := c.ResolveSkills(ctx, &skillsv1.ResolveSkillsRequest{Context: &skillsv1.TaskContext{Repo: "not a repo"}})
			return err
		}},
		{"ExecutePreRun", "context", func(ctx context.Context) error {
			_, err := c.ExecutePreRun(ctx, &skillsv1.ExecutePreRunRequest{})
			return err
		}},
		{"ExecutePreRun", "files[0].path", func(ctx context.Context) error {
			_, err := c.ExecutePreRun(ctx, &skillsv1.ExecutePreRunRequest{Context: tc(), Files: []*skillsv1.File{{Path: "/abs"}}})
			return err
		}},
		{"ExecutePreRun", "skill_ids[0]", func(ctx context.Context) error {
			_, err := c.ExecutePreRun(ctx, &skillsv1.ExecutePreRunRequest{Context: tc(), SkillIds: []string{"x"}})
			return err
		}},
		{"ExecutePostRun", "files[1].path", func(ctx context.Context) error {
			_, err := c.ExecutePostRun(ctx, &skillsv1.ExecutePostRunRequest{Context: tc(), Files: []*skillsv1.File{{Path: "a.go"}, {Path: "a.go"}}})
			return err
		}},
		{"ExecutePostRun", "files[0].content", func(ctx context.Context) error {
			_, err := c.ExecutePostRun(ctx, &skillsv1.ExecutePostRunRequest{Context: tc(), Files: []*skillsv1.File{{Path: "a.go", Content: strings.Repeat("x", 3<<20)}}})
			return err
		}},
		{"ExecutePostRun", "skill_ids[0]", func(ctx context.Context) error {
			_, err := c.ExecutePostRun(ctx, &skillsv1.ExecutePostRunRequest{Context: tc(), SkillIds: []string{ok.GetId()}})
			return err
		}},
		{"LogResult", "job_id", func(ctx context.Context) error {
			_, err := c.LogResult(ctx, &skillsv1.LogResultRequest{SkillIds: []string{ok.GetId()}})
			return err
		}},
		{"LogResult", "job_id", func(ctx context.Context) error {
			_, err := c.LogResult(ctx, &skillsv1.LogResultRequest{JobId: "job-1", SkillIds: []string{ok.GetId()}})
			return err
		}},
		{"LogResult", "task_id", func(ctx context.Context) error {
			_, err := c.LogResult(ctx, &skillsv1.LogResultRequest{JobId: job, TaskId: "t", SkillIds: []string{ok.GetId()}})
			return err
		}},
		{"LogResult", "skill_ids", func(ctx context.Context) error {
			_, err := c.LogResult(ctx, &skillsv1.LogResultRequest{JobId: job})
			return err
		}},
		{"LogResult", "skill_ids[0]", func(ctx context.Context) error {
			_, err := c.LogResult(ctx, &skillsv1.LogResultRequest{JobId: job, SkillIds: []string{"not-a-skill"}})
			return err
		}},
		{"LogResult", "quality_score", func(ctx context.Context) error {
			_, err := c.LogResult(ctx, &skillsv1.LogResultRequest{JobId: job, SkillIds: []string{ok.GetId()}, QualityScore: 11})
			return err
		}},
	}
	for _, tc := range cases {
		ctx := e.admin
		if tc.rpc == "LogResult" { // the agent's alone (TestLogResultOnlyFromTheAgent)
			ctx = e.agent
		}
		wantCode(t, tc.call(ctx), codes.InvalidArgument, tc.field)
		wantCode(t, tc.call(e.anon), codes.Unauthenticated, "")
	}
	// Every RPC of the service is among the cases.
	seen := map[string]bool{}
	for _, tc := range cases {
		seen[tc.rpc] = true
	}
	for _, m := range skillsv1.SkillService_ServiceDesc.Methods {
		if !seen[m.MethodName] {
			t.Errorf("no malformed-input case for %s", m.MethodName)
		}
	}
}
