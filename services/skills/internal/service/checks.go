package service

import (
	"cmp"
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/errs"
	skillsv1 "github.com/thefold/thefold/pkg/gen/thefold/skills/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/validate"

	"github.com/thefold/thefold/services/skills/internal/detect"
	"github.com/thefold/thefold/services/skills/internal/glob"
)

// Limits of what a check reads.
const (
	maxFiles     = 1000
	maxFileBytes = 2 << 20
	maxAllBytes  = 32 << 20
	maxInput     = 1 << 20
	// maxFindings bounds the findings of one rule on one file (a pattern matching every
	// line would otherwise flood the answer).
	maxFindings = 50
)

func checkFiles(field string, files []*skillsv1.File) ([]detect.File, error) {
	if len(files) > maxFiles {
		return nil, errs.Invalid(field, "at most %d files", maxFiles)
	}
	out := make([]detect.File, 0, len(files))
	total := 0
	seen := map[string]bool{}
	for i, f := range files {
		fld := fmt.Sprintf("%s[%d]", field, i)
		if err := validate.Path(fld+".path", f.GetPath()); err != nil {
			return nil, err
		}
		if seen[f.GetPath()] {
			return nil, errs.Invalid(fld+".path", "%q is given twice", f.GetPath())
		}
		seen[f.GetPath()] = true
		if len(f.GetContent()) > maxFileBytes {
			return nil, errs.Invalid(fld+".content", "larger than %d bytes", maxFileBytes)
		}
		if !utf8.ValidString(f.GetContent()) {
			return nil, errs.Invalid(fld+".content", "not UTF-8")
		}
		if total += len(f.GetContent()); total > maxAllBytes {
			return nil, errs.Invalid(field, "more than %d bytes in all", maxAllBytes)
		}
		out = append(out, detect.File{Path: f.GetPath(), Content: f.GetContent()})
	}
	return out, nil
}

// skillsFor returns the skills of ids (each of phase), or, without ids, the enabled skills
// of phase whose routing matches t.
func (s *Server) skillsFor(ctx context.Context, ids []string, t *task, phase skillsv1.SkillPhase) ([]*skillsv1.Skill, error) {
	ids, err := checkIDs("skill_ids", ids, false)
	if err != nil {
		return nil, err
	}
	if len(ids) > 0 {
		skills, err := s.store.ByIDs(ctx, ids)
		if err != nil {
			return nil, err
		}
		for i, sk := range skills {
			if sk.GetPhase() != phase {
				return nil, errs.Invalid(fmt.Sprintf("skill_ids[%d]", i), "skill %q is a %s skill, not %s", sk.GetName(), sk.GetPhase(), phase)
			}
		}
		return skills, nil
	}
	cands, err := s.candidates(ctx, t, phase)
	if err != nil {
		return nil, err
	}
	var out []*skillsv1.Skill
	for _, c := range cands {
		if c.skill.GetEnabled() && c.match.ok {
			out = append(out, c.skill)
		}
	}
	return out, nil
}

// findings collects a run's diagnostics.
type findings struct{ list []*typev1.Diagnostic }

func (f *findings) add(sk *skillsv1.Skill, rule *skillsv1.SkillRule, path string, line, col int, sev typev1.Severity, ruleID, msg string) {
	if rule.GetSeverity() != typev1.Severity_SEVERITY_UNSPECIFIED {
		sev = rule.GetSeverity()
	}
	if sev == typev1.Severity_SEVERITY_UNSPECIFIED {
		sev = typev1.Severity_SEVERITY_ERROR
	}
	if msg == "" {
		msg = rule.GetMessage()
	}
	if msg == "" {
		msg = fmt.Sprintf("rule %s of skill %s", rule.GetId(), sk.GetName())
	}
	f.list = append(f.list, &typev1.Diagnostic{Path: path, Line: int32(line), Column: int32(col), Severity: sev,
		Message: msg, Tool: "skills:" + sk.GetName(), Rule: ruleID})
}

// passed reports whether no finding is an error or worse.
func (f *findings) passed() bool {
	return !slices.ContainsFunc(f.list, func(d *typev1.Diagnostic) bool { return d.GetSeverity() >= typev1.Severity_SEVERITY_ERROR })
}

// sorted orders the findings most severe first, then by path, line, column and rule.
func (f *findings) sorted() []*typev1.Diagnostic {
	slices.SortStableFunc(f.list, func(a, b *typev1.Diagnostic) int {
		return cmp.Or(cmp.Compare(b.GetSeverity(), a.GetSeverity()), strings.Compare(a.GetPath(), b.GetPath()),
			cmp.Compare(a.GetLine(), b.GetLine()), cmp.Compare(a.GetColumn(), b.GetColumn()), strings.Compare(a.GetRule(), b.GetRule()))
	})
	return f.list
}

// applies reports whether a rule's file_globs select path (none: every file).
func applies(rule *skillsv1.SkillRule, path string) bool {
	if len(rule.GetFileGlobs()) == 0 {
		return true
	}
	return slices.ContainsFunc(rule.GetFileGlobs(), func(g string) bool { return glob.Match(g, path) })
}

// runRules runs sk's rules: GLOB rules on paths, REGEX rules on the files they apply to
// (and on text, under the empty path, when they name no files and text is non-nil),
// DETECTOR rules on the files; the toolchain detector adds notes.
func runRules(sk *skillsv1.Skill, paths []string, files []detect.File, text *string, out *findings, notes *[]string) {
	for _, rule := range sk.GetRules() {
		switch rule.GetKind() {
		case skillsv1.SkillRuleKind_SKILL_RULE_KIND_GLOB:
			for _, p := range paths {
				if glob.Match(rule.GetPattern(), p) {
					out.add(sk, rule, p, 0, 0, typev1.Severity_SEVERITY_ERROR, rule.GetId(),
						cmp.Or(rule.GetMessage(), fmt.Sprintf("%s matches %s", p, rule.GetPattern())))
				}
			}
		case skillsv1.SkillRuleKind_SKILL_RULE_KIND_DETECTOR:
			if rule.GetPattern() == toolchainDetector {
				if notes != nil {
					*notes = append(*notes, toolchain(files)...)
				}
				continue
			}
			for _, f := range files {
				if !applies(rule, f.Path) {
					continue
				}
				found, err := detect.Run(rule.GetPattern(), f)
				if err != nil { // validated at write time; a detector removed since
					out.add(sk, rule, f.Path, 0, 0, typev1.Severity_SEVERITY_WARNING, rule.GetId(), fmt.Sprintf("detector %q: %v", rule.GetPattern(), err))
					break
				}
				for _, d := range found {
					out.add(sk, rule, d.Path, d.Line, d.Column, d.Severity, rule.GetId()+"/"+strings.TrimPrefix(d.Rule, rule.GetPattern()+"/"), d.Message)
				}
			}
		default:
			re, err := regexp.Compile(rule.GetPattern())
			if err != nil {
				continue // validated at write time
			}
			if text != nil && len(rule.GetFileGlobs()) == 0 {
				regexFindings(sk, rule, re, "", *text, out)
			}
			for _, f := range files {
				if applies(rule, f.Path) {
					regexFindings(sk, rule, re, f.Path, f.Content, out)
				}
			}
		}
	}
}

// regexFindings reports each match of re in content (must_match: one finding when there is
// none), at its line and column (1-based, in bytes).
func regexFindings(sk *skillsv1.Skill, rule *skillsv1.SkillRule, re *regexp.Regexp, path, content string, out *findings) {
	locs := re.FindAllStringIndex(content, maxFindings)
	if rule.GetMustMatch() {
		if len(locs) == 0 {
			out.add(sk, rule, path, 0, 0, typev1.Severity_SEVERITY_ERROR, rule.GetId(),
				cmp.Or(rule.GetMessage(), fmt.Sprintf("nothing matches %s", rule.GetPattern())))
		}
		return
	}
	for _, loc := range locs {
		line := 1 + strings.Count(content[:loc[0]], "\n")
		col := loc[0] - strings.LastIndexByte(content[:loc[0]], '\n')
		out.add(sk, rule, path, line, col, typev1.Severity_SEVERITY_ERROR, rule.GetId(), "")
	}
}

// checkRun is what ExecutePreRun and ExecutePostRun check alike: the caller, the task, the
// text (the input or the output, named textField), the job id and the files; and the skills
// of phase to run (skillIDs, or those routed to the task).
func (s *Server) checkRun(ctx context.Context, tc *skillsv1.TaskContext, textField, text, jobID string, reqFiles []*skillsv1.File,
	skillIDs []string, phase skillsv1.SkillPhase) (*task, []detect.File, []*skillsv1.Skill, error) {
	if _, err := auth.MustFromContext(ctx); err != nil {
		return nil, nil, nil, err
	}
	t, err := checkContext("context", tc)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := validate.MaxLen(textField, text, maxInput); err != nil {
		return nil, nil, nil, err
	}
	if err := validate.MaxLen("job_id", jobID, 200); err != nil {
		return nil, nil, nil, err
	}
	files, err := checkFiles("files", reqFiles)
	if err != nil {
		return nil, nil, nil, err
	}
	skills, err := s.skillsFor(ctx, skillIDs, t, phase)
	if err != nil {
		return nil, nil, nil, err
	}
	return t, files, skills, nil
}

// runAll runs the rules of every skill, and returns the sorted findings, whether they pass,
// and the ids of the skills that ran.
func runAll(skills []*skillsv1.Skill, paths []string, files []detect.File, text *string, notes *[]string) ([]*typev1.Diagnostic, bool, []string) {
	var out findings
	var ids []string
	for _, sk := range skills {
		runRules(sk, paths, files, text, &out, notes)
		ids = append(ids, sk.GetId())
	}
	return out.sorted(), out.passed(), ids
}

// ExecutePreRun runs the PRE_RUN skills' rules on a task's input, the paths it targets and
// the repository files given.
func (s *Server) ExecutePreRun(ctx context.Context, req *skillsv1.ExecutePreRunRequest) (*skillsv1.ExecutePreRunResponse, error) {
	t, files, skills, err := s.checkRun(ctx, req.GetContext(), "input", req.GetInput(), req.GetJobId(), req.GetFiles(),
		req.GetSkillIds(), skillsv1.SkillPhase_SKILL_PHASE_PRE_RUN)
	if err != nil {
		return nil, err
	}
	input := req.GetInput()
	resp := &skillsv1.ExecutePreRunResponse{Input: input}
	// GLOB rules judge what the task targets, not the files given for context.
	resp.Diagnostics, resp.Passed, resp.SkillIds = runAll(skills, t.paths, files, &input, &resp.Notes)
	s.log.InfoContext(ctx, "pre-run checks", "job_id", req.GetJobId(), "skills", len(skills), "findings", len(resp.Diagnostics), "passed", resp.Passed)
	return resp, nil
}

// ExecutePostRun runs the POST_RUN skills' rules on produced files.
func (s *Server) ExecutePostRun(ctx context.Context, req *skillsv1.ExecutePostRunRequest) (*skillsv1.ExecutePostRunResponse, error) {
	_, files, skills, err := s.checkRun(ctx, req.GetContext(), "output", req.GetOutput(), req.GetJobId(), req.GetFiles(),
		req.GetSkillIds(), skillsv1.SkillPhase_SKILL_PHASE_POST_RUN)
	if err != nil {
		return nil, err
	}
	paths := make([]string, 0, len(files))
	for _, f := range files {
		paths = append(paths, f.Path)
	}
	var text *string
	if req.GetOutput() != "" {
		o := req.GetOutput()
		text = &o
	}
	resp := &skillsv1.ExecutePostRunResponse{}
	resp.Diagnostics, resp.Passed, resp.SkillIds = runAll(skills, paths, files, text, nil)
	s.log.InfoContext(ctx, "post-run checks", "job_id", req.GetJobId(), "skills", len(skills), "files", len(files),
		"findings", len(resp.Diagnostics), "passed", resp.Passed)
	return resp, nil
}
