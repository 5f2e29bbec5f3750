package service_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	skillsv1 "github.com/thefold/thefold/pkg/gen/thefold/skills/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/tokens"

	"github.com/thefold/thefold/services/skills/internal/seed"
)

// Admins create, change and delete skills; anyone authenticated reads them; a stale
// version is ABORTED and a taken name ALREADY_EXISTS.
func TestCRUDIsForAdmins(t *testing.T) {
	t.Parallel()
	e := start(t)
	sk := inject("go-errors", "Wrap errors with %w.", 0, &skillsv1.SkillRouting{Languages: []string{"go"}})
	_, err := e.client.CreateSkill(e.alice, &skillsv1.CreateSkillRequest{Skill: sk})
	wantCode(t, err, codes.PermissionDenied, "admin")

	got := e.create(t, sk)
	if got.GetId() == "" || got.GetVersion() != 1 || got.GetOwnerId() != "root" || got.GetPriority() != 50 ||
		got.GetConfidence() != 0.5 || got.GetTokens() != int32(tokens.Count("Wrap errors with %w.")) ||
		got.GetScope() != skillsv1.SkillScope_SKILL_SCOPE_GLOBAL || got.GetCategory() != skillsv1.SkillCategory_SKILL_CATEGORY_GENERAL {
		t.Fatalf("created %v", got)
	}
	if r, err := e.client.GetSkill(e.alice, &skillsv1.GetSkillRequest{Id: got.GetId()}); err != nil || r.GetSkill().GetName() != "go-errors" {
		t.Fatalf("get: %v %v", r, err)
	}
	if r, err := e.client.ListSkills(e.alice, &skillsv1.ListSkillsRequest{}); err != nil || len(r.GetSkills()) != 1 {
		t.Fatalf("list: %v %v", r, err)
	}
	_, err = e.client.CreateSkill(e.admin, &skillsv1.CreateSkillRequest{Skill: sk})
	wantCode(t, err, codes.AlreadyExists, "go-errors")

	upd := &skillsv1.UpdateSkillRequest{Id: got.GetId(), Skill: &skillsv1.Skill{PromptFragment: "Wrap errors once per layer with %w.", Version: 1},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"prompt_fragment"}}}
	_, err = e.client.UpdateSkill(e.alice, upd)
	wantCode(t, err, codes.PermissionDenied, "admin")
	u, err := e.client.UpdateSkill(e.admin, upd)
	if err != nil || u.GetSkill().GetVersion() != 2 || u.GetSkill().GetTokens() != int32(tokens.Count("Wrap errors once per layer with %w.")) {
		t.Fatalf("update: %v %v", u, err)
	}
	_, err = e.client.UpdateSkill(e.admin, upd) // version 1 again: stale
	wantCode(t, err, codes.Aborted, "version")

	_, err = e.client.DeleteSkill(e.alice, &skillsv1.DeleteSkillRequest{Id: got.GetId()})
	wantCode(t, err, codes.PermissionDenied, "admin")
	if _, err := e.client.DeleteSkill(e.admin, &skillsv1.DeleteSkillRequest{Id: got.GetId()}); err != nil {
		t.Fatal(err)
	}
	_, err = e.client.GetSkill(e.alice, &skillsv1.GetSkillRequest{Id: got.GetId()})
	wantCode(t, err, codes.NotFound, "")
}

// Each routing rule kind selects on its own, all non-empty lists must match, and each
// selected skill says which rules matched.
func TestRoutingByEachRuleKind(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.create(t, inject("kw", "Migrations are forward-only.", 50, &skillsv1.SkillRouting{Keywords: []string{"migration"}}))
	e.create(t, inject("glob", "SQL style.", 50, &skillsv1.SkillRouting{FileGlobs: []string{"**/*.sql"}}))
	e.create(t, inject("lang", "Go style.", 50, &skillsv1.SkillRouting{Languages: []string{"go"}}))
	e.create(t, inject("repo", "This repository's rules.", 50, &skillsv1.SkillRouting{Repos: []string{"acme/api"}}))
	e.create(t, inject("label", "Security review.", 50, &skillsv1.SkillRouting{Labels: []string{"security"}}))
	e.create(t, inject("both", "Go migrations.", 50, &skillsv1.SkillRouting{Keywords: []string{"migration"}, Languages: []string{"go"}}))
	e.create(t, inject("any", "General advice.", 50, nil))
	off := inject("off", "Disabled.", 50, nil)
	off.Enabled = false
	e.create(t, off)

	for _, c := range []struct {
		name string
		tc   *skillsv1.TaskContext
		want []string
	}{
		{"keyword, plural too", &skillsv1.TaskContext{Description: "Write the migrations for users"}, []string{"any", "kw"}},
		{"glob", &skillsv1.TaskContext{Description: "x", FilePaths: []string{"db/0001_users.sql"}}, []string{"any", "glob"}},
		{"language from a path", &skillsv1.TaskContext{Description: "x", FilePaths: []string{"cmd/api/main.go"}}, []string{"any", "lang"}},
		{"language given", &skillsv1.TaskContext{Description: "x", Languages: []string{"Go"}}, []string{"any", "lang"}},
		{"repository", &skillsv1.TaskContext{Description: "x", Repo: "acme/api"}, []string{"any", "repo"}},
		{"label, any case", &skillsv1.TaskContext{Description: "x", Labels: []string{"Security"}}, []string{"any", "label"}},
		{"two lists, both match", &skillsv1.TaskContext{Description: "add a migration", Languages: []string{"go"}}, []string{"any", "both", "kw", "lang"}},
		{"nothing specific", &skillsv1.TaskContext{Description: "rename a button"}, []string{"any"}},
	} {
		resp, err := e.client.ResolveSkills(e.alice, &skillsv1.ResolveSkillsRequest{Context: c.tc})
		if err != nil {
			t.Fatal(err)
		}
		got := names(resp.GetSelected())
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: selected %v, want %v", c.name, got, c.want)
		}
		for _, r := range resp.GetSelected() {
			if r.GetMatchReason() == "" || r.GetScore() <= 0 || r.GetConfidence() != 0.5 {
				t.Errorf("%s: %v", c.name, r)
			}
		}
		var disabled bool
		for _, s := range resp.GetSkipped() {
			if s.GetName() == "off" && s.GetReason() == skillsv1.SkipReason_SKIP_REASON_DISABLED {
				disabled = true
			}
			if s.GetReason() == skillsv1.SkipReason_SKIP_REASON_NO_MATCH && s.GetDetail() == "" {
				t.Errorf("%s: skipped without a reason: %v", c.name, s)
			}
		}
		if !disabled {
			t.Errorf("%s: the disabled skill is not reported as such: %v", c.name, resp.GetSkipped())
		}
	}
	// A match of two lists outranks one of either, which outranks a skill without rules.
	resp, _ := e.client.ResolveSkills(e.alice, &skillsv1.ResolveSkillsRequest{Context: &skillsv1.TaskContext{Description: "add a migration", Languages: []string{"go"}}})
	if got := names(resp.GetSelected()); got[0] != "both" || got[len(got)-1] != "any" {
		t.Fatalf("order %v", got)
	}
	if r := resp.GetSelected()[0]; !strings.Contains(r.GetMatchReason(), `keyword "migration"`) || !strings.Contains(r.GetMatchReason(), `language "go"`) {
		t.Fatalf("reason %q", r.GetMatchReason())
	}
}

// Skills are taken by score until the budget is spent; one that does not fit is skipped
// and smaller ones after it may still fit; tokens_used never exceeds the budget.
func TestBudgetCutOffAndOrdering(t *testing.T) {
	t.Parallel()
	e := start(t)
	big := e.create(t, inject("big", strings.Repeat("Always check every error returned by a call. ", 40), 90, nil))
	mid := e.create(t, inject("mid", strings.Repeat("Name things for what they mean. ", 10), 60, nil))
	small := e.create(t, inject("small", "Keep functions short.", 30, nil))
	budget := mid.GetTokens() + small.GetTokens() + 1
	if big.GetTokens() <= budget {
		t.Fatalf("big has %d tokens, budget %d", big.GetTokens(), budget)
	}
	resp, err := e.client.ResolveSkills(e.alice, &skillsv1.ResolveSkillsRequest{Context: &skillsv1.TaskContext{Description: "x"}, TokenBudget: &budget})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(resp.GetSelected()); !slices.Equal(got, []string{"mid", "small"}) {
		t.Fatalf("selected %v", got)
	}
	if resp.GetTokensUsed() != mid.GetTokens()+small.GetTokens() || resp.GetTokensUsed() > budget {
		t.Fatalf("tokens used %d of %d", resp.GetTokensUsed(), budget)
	}
	if len(resp.GetSkipped()) != 1 || resp.GetSkipped()[0].GetName() != "big" ||
		resp.GetSkipped()[0].GetReason() != skillsv1.SkipReason_SKIP_REASON_TOKEN_BUDGET || !strings.Contains(resp.GetSkipped()[0].GetDetail(), "tokens") {
		t.Fatalf("skipped %v", resp.GetSkipped())
	}
	if s := resp.GetSelected(); s[0].GetScore() < s[1].GetScore() {
		t.Fatalf("not by score: %v", s)
	}
	// The default budget holds them all.
	resp, _ = e.client.ResolveSkills(e.alice, &skillsv1.ResolveSkillsRequest{Context: &skillsv1.TaskContext{Description: "x"}})
	if got := names(resp.GetSelected()); !slices.Equal(got, []string{"big", "mid", "small"}) {
		t.Fatalf("default budget: %v", got)
	}
}

// Confidence is neutral (0.5) for an unused skill; results the agent logs move it (once per
// job and skill) and with it the order of skills otherwise alike.
func TestScoringFollowsResults(t *testing.T) {
	t.Parallel()
	e := start(t)
	a := e.create(t, inject("a", "Advice A.", 50, nil))
	b := e.create(t, inject("b", "Advice B.", 50, nil))
	c := e.create(t, inject("c", "Advice C.", 50, nil))
	job1, job2, job3 := e.job("alice"), e.job("alice"), e.job("alice")
	for range 2 { // a retried call changes nothing
		if _, err := e.client.LogResult(e.agent, &skillsv1.LogResultRequest{JobId: job1, SkillIds: []string{b.GetId()}, Success: true, QualityScore: 8}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := e.client.LogResult(e.agent, &skillsv1.LogResultRequest{JobId: job2, SkillIds: []string{a.GetId(), b.GetId()}, Success: false})
	if err != nil {
		t.Fatal(err)
	}
	sc := r.GetScores()
	if len(sc) != 2 || sc[0].GetConfidence() != 0 || sc[0].GetFailureCount() != 1 ||
		sc[1].GetSuccessCount() != 1 || sc[1].GetFailureCount() != 1 || sc[1].GetConfidence() != 0.5 {
		t.Fatalf("scores %v", sc)
	}
	if _, err := e.client.LogResult(e.agent, &skillsv1.LogResultRequest{JobId: job3, SkillIds: []string{b.GetId()}, Success: true}); err != nil {
		t.Fatal(err)
	}
	resp, _ := e.client.ResolveSkills(e.alice, &skillsv1.ResolveSkillsRequest{Context: &skillsv1.TaskContext{Description: "x"}})
	// b: 2 of 3 succeeded; c: unused, neutral; a: 0 of 1.
	if got := names(resp.GetSelected()); !slices.Equal(got, []string{"b", "c", "a"}) {
		t.Fatalf("order %v", got)
	}
	if got, _ := e.client.GetSkill(e.alice, &skillsv1.GetSkillRequest{Id: c.GetId()}); got.GetSkill().GetConfidence() != 0.5 {
		t.Fatalf("unused skill's confidence %v", got.GetSkill().GetConfidence())
	}
	_, err = e.client.LogResult(e.agent, &skillsv1.LogResultRequest{JobId: e.job("alice"), SkillIds: []string{"9b2f7d1e-0000-4000-8000-000000000000"}, Success: true})
	wantCode(t, err, codes.NotFound, "")
}

// The built-in skills: a SQL migration task on a Go repository gets the migration and Go
// skills within the budget; a produced file with an AWS-style key and InsecureSkipVerify
// fails the post-run check with both reported; a clean one passes.
func TestBuiltinSkills(t *testing.T) {
	t.Parallel()
	e := start(t)
	if err := e.srv.Seed(context.Background(), seed.Builtin()); err != nil {
		t.Fatal(err)
	}
	if err := e.srv.Seed(context.Background(), seed.Builtin()); err != nil { // a second start seeds nothing new
		t.Fatal(err)
	}
	list, _ := e.client.ListSkills(e.alice, &skillsv1.ListSkillsRequest{PageSize: 200})
	if len(list.GetSkills()) != len(seed.Builtin()) {
		t.Fatalf("%d skills after seeding twice, want %d", len(list.GetSkills()), len(seed.Builtin()))
	}
	budget := int32(3000)
	resp, err := e.client.ResolveSkills(e.alice, &skillsv1.ResolveSkillsRequest{Phase: skillsv1.SkillPhase_SKILL_PHASE_INJECT, TokenBudget: &budget,
		Context: &skillsv1.TaskContext{Description: "add a SQL migration for users", Repo: "acme/api", Languages: []string{"go"}}})
	if err != nil {
		t.Fatal(err)
	}
	got := names(resp.GetSelected())
	for _, want := range []string{"sql-migrations", "go-service-conventions", "go-error-handling"} {
		if !slices.Contains(got, want) {
			t.Errorf("%s not selected: %v", want, got)
		}
	}
	if got[0] != "sql-migrations" || slices.Contains(got, "typescript-strictness") || resp.GetTokensUsed() > budget {
		t.Fatalf("selected %v, %d tokens", got, resp.GetTokensUsed())
	}

	bad := "package cfg\n\nimport \"crypto/tls\"\n\nconst awsKey = \"AKIAQ3EGRJ7XKZ4P2WNM\"\n\nvar TLS = &tls.Config{InsecureSkipVerify: true}\n"
	post, err := e.client.ExecutePostRun(e.alice, &skillsv1.ExecutePostRunRequest{Context: &skillsv1.TaskContext{Description: "x", Repo: "acme/api"},
		Files: []*skillsv1.File{{Path: "internal/cfg/cfg.go", Content: bad}}, JobId: "job-1"})
	if err != nil {
		t.Fatal(err)
	}
	var key, tlsOff bool
	for _, d := range post.GetDiagnostics() {
		if d.GetTool() != "skills:security-review" || d.GetPath() != "internal/cfg/cfg.go" || d.GetLine() == 0 || d.GetColumn() == 0 {
			t.Errorf("finding %v", d)
		}
		key = key || (strings.HasPrefix(d.GetRule(), "secrets/") && d.GetLine() == 5)
		tlsOff = tlsOff || (strings.Contains(d.GetRule(), "insecure-skip-verify") && d.GetLine() == 7)
		if strings.Contains(d.GetMessage(), "AKIAQ3EGRJ7XKZ4P2WNM") {
			t.Errorf("a finding repeats the secret: %q", d.GetMessage())
		}
	}
	if !key || !tlsOff || post.GetPassed() {
		t.Fatalf("post-run: key %v, InsecureSkipVerify %v, passed %v: %v", key, tlsOff, post.GetPassed(), post.GetDiagnostics())
	}
	clean, err := e.client.ExecutePostRun(e.alice, &skillsv1.ExecutePostRunRequest{Context: &skillsv1.TaskContext{Description: "x"},
		Files: []*skillsv1.File{{Path: "main.go", Content: "package main\n\nimport \"os\"\n\nfunc main() { _ = os.Getenv(\"AWS_SECRET_ACCESS_KEY\") }\n"}}})
	if err != nil || !clean.GetPassed() || len(clean.GetDiagnostics()) != 0 {
		t.Fatalf("clean file: %v %v", clean, err)
	}

	// Pre-run: a task targeting an environment file is refused; the toolchain is noted.
	pre, err := e.client.ExecutePreRun(e.alice, &skillsv1.ExecutePreRunRequest{
		Context: &skillsv1.TaskContext{Description: "set the database password", FilePaths: []string{"deploy/.env", "cmd/api/main.go"}},
		Input:   "set the database password",
		Files: []*skillsv1.File{{Path: "go.mod", Content: "module example.com/api\n\ngo 1.24\n\ntoolchain go1.24.3\n"},
			{Path: "web/package.json", Content: `{"type": "module", "engines": {"node": ">=22"}, "devDependencies": {"typescript": "^5.6.0"}, "scripts": {"test": "vitest run"}}`}}})
	if err != nil {
		t.Fatal(err)
	}
	if pre.GetPassed() || len(pre.GetDiagnostics()) != 1 || pre.GetDiagnostics()[0].GetPath() != "deploy/.env" ||
		pre.GetDiagnostics()[0].GetSeverity() != typev1.Severity_SEVERITY_ERROR {
		t.Fatalf("pre-run findings %v", pre.GetDiagnostics())
	}
	notes := strings.Join(pre.GetNotes(), "\n")
	for _, want := range []string{"example.com/api", "go 1.24", "go1.24.3", "Node >=22", "TypeScript ^5.6.0", "ES modules", "vitest run"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes %q lack %q", notes, want)
		}
	}
	if pre.GetInput() != "set the database password" || pre.GetModified() {
		t.Fatalf("input changed: %v", pre)
	}
	ok, _ := e.client.ExecutePreRun(e.alice, &skillsv1.ExecutePreRunRequest{Context: &skillsv1.TaskContext{Description: "x", FilePaths: []string{"main.go"}}})
	if !ok.GetPassed() {
		t.Fatalf("a harmless task failed pre-run: %v", ok.GetDiagnostics())
	}
}

// Configured rules: a REGEX rule finds its matches at their line and column (or, with
// must_match, their absence), limited to its files; a GLOB rule flags produced paths.
func TestConfiguredRules(t *testing.T) {
	t.Parallel()
	e := start(t)
	sk := e.create(t, &skillsv1.Skill{Name: "house-rules", Phase: skillsv1.SkillPhase_SKILL_PHASE_POST_RUN, Enabled: true, Rules: []*skillsv1.SkillRule{
		{Id: "no-println", Pattern: `fmt\.Println\(`, FileGlobs: []string{"**/*.go"}, Message: "use the logger", Severity: typev1.Severity_SEVERITY_WARNING},
		{Id: "license", Pattern: `(?m)^// SPDX-License-Identifier:`, MustMatch: true, FileGlobs: []string{"**/*.go"}, Message: "every Go file names its license"},
		{Id: "no-vendor", Kind: skillsv1.SkillRuleKind_SKILL_RULE_KIND_GLOB, Pattern: "vendor/**", Message: "do not write into vendor/"},
	}})
	resp, err := e.client.ExecutePostRun(e.alice, &skillsv1.ExecutePostRunRequest{Context: &skillsv1.TaskContext{Description: "x"}, SkillIds: []string{sk.GetId()},
		Files: []*skillsv1.File{
			{Path: "main.go", Content: "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hi\")\n}\n"},
			{Path: "README.md", Content: "fmt.Println( in prose is fine\n"},
			{Path: "vendor/x/x.go", Content: "// SPDX-License-Identifier: MIT\npackage x\n"},
		}})
	if err != nil {
		t.Fatal(err)
	}
	type f struct {
		path, rule string
		line, col  int32
		sev        typev1.Severity
	}
	var got []f
	for _, d := range resp.GetDiagnostics() {
		got = append(got, f{d.GetPath(), d.GetRule(), d.GetLine(), d.GetColumn(), d.GetSeverity()})
	}
	want := []f{
		{"main.go", "license", 0, 0, typev1.Severity_SEVERITY_ERROR},
		{"vendor/x/x.go", "no-vendor", 0, 0, typev1.Severity_SEVERITY_ERROR},
		{"main.go", "no-println", 6, 2, typev1.Severity_SEVERITY_WARNING},
	}
	if !slices.Equal(got, want) || resp.GetPassed() || !slices.Equal(resp.GetSkillIds(), []string{sk.GetId()}) {
		t.Fatalf("findings %v, want %v (passed %v)", got, want, resp.GetPassed())
	}
	// An INJECT skill cannot be run as a check.
	inj := e.create(t, inject("advice", "Advice.", 50, nil))
	_, err = e.client.ExecutePostRun(e.alice, &skillsv1.ExecutePostRunRequest{Context: &skillsv1.TaskContext{Description: "x"}, SkillIds: []string{inj.GetId()}})
	wantCode(t, err, codes.InvalidArgument, "skill_ids[0]")
}

// ListSkills pages by priority (highest first), then name; filters by phase, repository
// and enabled.
func TestListSkillsPagesAndFilters(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.create(t, inject("b", "B.", 60, nil))
	e.create(t, inject("a", "A.", 60, nil))
	e.create(t, inject("c", "C.", 90, nil))
	repoSkill := inject("local-rule", "Ours.", 10, nil)
	repoSkill.Scope, repoSkill.Repo = skillsv1.SkillScope_SKILL_SCOPE_REPO, "acme/api"
	e.create(t, repoSkill)
	off := inject("off", "Off.", 50, nil)
	off.Enabled = false
	e.create(t, off)
	e.create(t, &skillsv1.Skill{Name: "check", Phase: skillsv1.SkillPhase_SKILL_PHASE_POST_RUN, Enabled: true,
		Rules: []*skillsv1.SkillRule{{Id: "x", Pattern: "x"}}})

	var got []string
	tok := ""
	for pages := 0; ; pages++ {
		r, err := e.client.ListSkills(e.alice, &skillsv1.ListSkillsRequest{PageSize: 2, PageToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range r.GetSkills() {
			got = append(got, s.GetName())
		}
		if tok = r.GetNextPageToken(); tok == "" {
			break
		}
		if pages > 5 {
			t.Fatal("paging does not end")
		}
	}
	if want := []string{"c", "a", "b", "check", "off", "local-rule"}; !slices.Equal(got, want) {
		t.Fatalf("pages %v, want %v", got, want)
	}
	enabled := true
	for _, c := range []struct {
		req  *skillsv1.ListSkillsRequest
		want []string
	}{
		{&skillsv1.ListSkillsRequest{Phase: skillsv1.SkillPhase_SKILL_PHASE_POST_RUN}, []string{"check"}},
		{&skillsv1.ListSkillsRequest{Repo: "acme/api", Enabled: &enabled}, []string{"c", "a", "b", "check", "local-rule"}},
		{&skillsv1.ListSkillsRequest{Repo: "acme/web", Enabled: &enabled}, []string{"c", "a", "b", "check"}},
	} {
		r, err := e.client.ListSkills(e.alice, c.req)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, s := range r.GetSkills() {
			names = append(names, s.GetName())
		}
		if !slices.Equal(names, c.want) {
			t.Errorf("%v: %v, want %v", c.req, names, c.want)
		}
	}
}
