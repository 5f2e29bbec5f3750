package service

import (
	"fmt"
	"path"
	"regexp"
	"strings"

	"github.com/thefold/thefold/pkg/errs"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/validate"
)

// Limits on AIService input. Prompts sanitise and cap untrusted text themselves; these
// bound what a request may hold at all, so one call cannot ask for an unbounded prompt.
const (
	maxTitle        = 500
	maxDescription  = 65536
	maxText         = 1 << 20 // one file's content, an error output, a project request
	maxFiles        = 200     // context, dependency and review files
	maxTreePaths    = 20000
	maxPath         = 1024
	maxListItems    = 200 // memories, skills, patterns, attempts, diagnostics
	maxTasks        = 500 // PlanTaskOrder
	maxEmbedTexts   = 2048
	maxEmbedText    = 64 << 10
	maxMessages     = 500
	maxTools        = 64
	maxID           = 200
	maxModelName    = 200
	maxTag          = 32
	maxTags         = 20
	maxOutputTokens = 1 << 20
)

var (
	tagPattern      = regexp.MustCompile(`^[a-z0-9_-]{1,32}$`)
	toolNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
)

func checkCommon(requestID string, choice *aiv1.ModelChoice, a *aiv1.Attribution) error {
	if err := validate.RequestID("request_id", requestID); err != nil {
		return err
	}
	if err := checkChoice("model", choice); err != nil {
		return err
	}
	return checkAttribution(a)
}

func checkChoice(field string, c *aiv1.ModelChoice) error {
	if c == nil {
		return nil
	}
	if err := validate.MaxLen(field+".model", c.Model, maxModelName); err != nil {
		return err
	}
	if c.Complexity < 0 || c.Complexity > 10 {
		return errs.Invalid(field+".complexity", "want 0 to 10, got %d", c.Complexity)
	}
	if err := checkTags(field+".tags", c.Tags); err != nil {
		return err
	}
	return validate.Enum(field+".budget_mode", c.BudgetMode, true)
}

func checkTags(field string, tags []string) error {
	if len(tags) > maxTags {
		return errs.Invalid(field, "at most %d tags", maxTags)
	}
	for _, t := range tags {
		if !tagPattern.MatchString(t) {
			return errs.Invalid(field, "tag %q: want lower-case letters, digits, '_' or '-', at most %d", validate.Truncate(t, 40), maxTag)
		}
	}
	return nil
}

func checkAttribution(a *aiv1.Attribution) error {
	if a == nil {
		return nil
	}
	for _, f := range []struct{ name, v string }{
		{"attribution.job_id", a.JobId}, {"attribution.task_id", a.TaskId},
		{"attribution.build_id", a.BuildId}, {"attribution.project_id", a.ProjectId},
		{"attribution.conversation_id", a.ConversationId},
	} {
		if err := validate.MaxLen(f.name, f.v, maxID); err != nil {
			return err
		}
	}
	if err := validate.Repo("attribution.repo", a.Repo, false); err != nil {
		return err
	}
	if err := validate.Enum("attribution.phase", a.Phase, true); err != nil {
		return err
	}
	if a.Role != aiv1.SubAgentRole_SUB_AGENT_ROLE_UNSPECIFIED {
		if err := validate.Enum("attribution.role", a.Role, true); err != nil {
			return err
		}
		return errs.Invalid("attribution.role", "is set by RunSubAgents for its own calls; leave it unset")
	}
	return nil
}

func checkTask(field string, t *aiv1.TaskSpec) error {
	if t == nil {
		return errs.Invalid(field, "required")
	}
	if strings.TrimSpace(t.Title) == "" && strings.TrimSpace(t.Description) == "" {
		return errs.Invalid(field+".title", "required (or a description)")
	}
	if err := validate.MaxLen(field+".title", t.Title, maxTitle); err != nil {
		return err
	}
	if err := validate.MaxLen(field+".description", t.Description, maxDescription); err != nil {
		return err
	}
	_, err := validate.Labels(field+".labels", t.Labels, 64, 50)
	return err
}

// checkPath accepts a relative, '/'-separated path inside the repository.
func checkPath(field, p string) error {
	switch {
	case p == "":
		return errs.Invalid(field, "required")
	case len(p) > maxPath:
		return errs.Invalid(field, "at most %d bytes", maxPath)
	case strings.HasPrefix(p, "/") || strings.Contains(p, "\\"):
		return errs.Invalid(field, "want a relative '/'-separated path, got %q", validate.Truncate(p, 80))
	case path.Clean(p) != p || p == "." || p == ".." || strings.HasPrefix(p, "../"):
		return errs.Invalid(field, "want a clean path inside the repository, got %q", validate.Truncate(p, 80))
	}
	return nil
}

func checkTree(field string, tree []string) error {
	if len(tree) > maxTreePaths {
		return errs.Invalid(field, "at most %d paths", maxTreePaths)
	}
	for i, p := range tree {
		if len(p) > maxPath {
			return errs.Invalid(fmt.Sprintf("%s[%d]", field, i), "at most %d bytes", maxPath)
		}
	}
	return nil
}

func checkContextFiles(field string, files []*aiv1.ContextFile) error {
	if len(files) > maxFiles {
		return errs.Invalid(field, "at most %d files", maxFiles)
	}
	seen := map[string]bool{}
	for i, f := range files {
		name := fmt.Sprintf("%s[%d]", field, i)
		if err := checkPath(name+".path", f.GetPath()); err != nil {
			return err
		}
		if seen[f.Path] {
			return errs.Invalid(name+".path", "%q is listed twice", f.Path)
		}
		seen[f.Path] = true
		if len(f.Content) > maxText {
			return errs.Invalid(name+".content", "at most %d bytes", maxText)
		}
	}
	return nil
}

func checkCount(field string, n, max int) error {
	if n > max {
		return errs.Invalid(field, "at most %d items", max)
	}
	return nil
}

func checkBytes(field, v string, max int) error {
	if len(v) > max {
		return errs.Invalid(field, "at most %d bytes", max)
	}
	return nil
}

func checkMemories(field string, ms []*aiv1.MemoryFragment) error {
	if err := checkCount(field, len(ms), maxListItems); err != nil {
		return err
	}
	for i, m := range ms {
		name := fmt.Sprintf("%s[%d]", field, i)
		if err := checkBytes(name+".content", m.GetContent(), maxText); err != nil {
			return err
		}
		if err := validate.Enum(name+".trust", m.GetTrust(), true); err != nil {
			return err
		}
	}
	return nil
}

func checkDiagnostics(field string, ds []*typev1.Diagnostic) error {
	if err := checkCount(field, len(ds), maxListItems); err != nil {
		return err
	}
	for i, d := range ds {
		if err := checkBytes(fmt.Sprintf("%s[%d].message", field, i), d.GetMessage(), maxText); err != nil {
			return err
		}
	}
	return nil
}

func checkAttempts(field string, as []*aiv1.AttemptRecord) error {
	if err := checkCount(field, len(as), maxListItems); err != nil {
		return err
	}
	for i, a := range as {
		name := fmt.Sprintf("%s[%d]", field, i)
		if err := checkDiagnostics(name+".errors", a.GetErrors()); err != nil {
			return err
		}
		if err := checkBytes(name+".error", a.GetError(), maxText); err != nil {
			return err
		}
		if err := validate.Enum(name+".category", a.GetCategory(), true); err != nil {
			return err
		}
	}
	return nil
}

func checkReviewFiles(field string, files []*aiv1.ReviewFile, required bool) error {
	if required && len(files) == 0 {
		return errs.Invalid(field, "at least one file")
	}
	if err := checkCount(field, len(files), maxFiles); err != nil {
		return err
	}
	for i, f := range files {
		name := fmt.Sprintf("%s[%d]", field, i)
		if err := checkPath(name+".path", f.GetPath()); err != nil {
			return err
		}
		if err := validate.Enum(name+".action", f.GetAction(), false); err != nil {
			return err
		}
		if err := checkBytes(name+".content", f.GetContent(), maxText); err != nil {
			return err
		}
		if err := checkBytes(name+".diff", f.GetDiff(), maxText); err != nil {
			return err
		}
	}
	return nil
}

func checkProjectPlan(field string, p *aiv1.ProjectPlan) error {
	if p == nil || len(p.Phases) == 0 {
		return errs.Invalid(field+".phases", "at least one phase")
	}
	for i, ph := range p.Phases {
		if err := checkCount(fmt.Sprintf("%s.phases[%d].tasks", field, i), len(ph.GetTasks()), maxTasks); err != nil {
			return err
		}
	}
	return checkBytes(field+".conventions", p.Conventions, maxText)
}

// checkShownPlan checks a plan given to the model as context (not one to execute): at most
// maxTasks steps, the texts bounded. Nil is allowed.
func checkShownPlan(field string, p *typev1.Plan) error {
	if p == nil {
		return nil
	}
	if err := checkBytes(field+".summary", p.GetSummary(), maxDescription); err != nil {
		return err
	}
	if err := checkCount(field+".steps", len(p.GetSteps()), maxTasks); err != nil {
		return err
	}
	for i, s := range p.GetSteps() {
		name := fmt.Sprintf("%s.steps[%d]", field, i)
		if err := checkBytes(name+".description", s.GetDescription(), maxDescription); err != nil {
			return err
		}
		if err := checkBytes(name+".id", s.GetId(), maxID); err != nil {
			return err
		}
		if err := validate.Enum(name+".action", s.GetAction(), true); err != nil {
			return err
		}
	}
	return nil
}

// checkFixHistory checks FixFile's earlier rounds.
func checkFixHistory(field string, rs []*aiv1.FixHistory) error {
	if err := checkCount(field, len(rs), 20); err != nil {
		return err
	}
	for i, r := range rs {
		name := fmt.Sprintf("%s[%d]", field, i)
		if r.GetRound() < 1 {
			return errs.Invalid(name+".round", "must be 1 or more, got %d", r.GetRound())
		}
		if err := checkBytes(name+".explanation", r.GetExplanation(), maxDescription); err != nil {
			return err
		}
		if err := checkBytes(name+".error", r.GetError(), maxDescription); err != nil {
			return err
		}
		if err := checkDiagnostics(name+".errors_after", r.GetErrorsAfter()); err != nil {
			return err
		}
	}
	return nil
}

// checkRelated checks FixFile's related files: at most 5, each a file as context files are,
// none the fixed file itself, none twice.
func checkRelated(field, target string, fs []*aiv1.ContextFile) error {
	if err := checkCount(field, len(fs), 5); err != nil {
		return err
	}
	if err := checkContextFiles(field, fs); err != nil {
		return err
	}
	seen := map[string]bool{}
	for i, f := range fs {
		name := fmt.Sprintf("%s[%d].path", field, i)
		if f.GetPath() == target {
			return errs.Invalid(name, "%q is the file being fixed", f.GetPath())
		}
		if seen[f.GetPath()] {
			return errs.Invalid(name, "%q is given twice", f.GetPath())
		}
		seen[f.GetPath()] = true
	}
	return nil
}
