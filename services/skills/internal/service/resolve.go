package service

import (
	"context"
	"fmt"
	"math"
	"path"
	"slices"
	"strings"
	"unicode"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/errs"
	skillsv1 "github.com/thefold/thefold/pkg/gen/thefold/skills/v1"
	"github.com/thefold/thefold/pkg/validate"

	"github.com/thefold/thefold/services/skills/internal/detect"
	"github.com/thefold/thefold/services/skills/internal/glob"
)

// defaultBudget is ResolveSkills' token budget when the request sets none.
const defaultBudget = 4000

// task is a TaskContext prepared for routing.
type task struct {
	text      string   // the description, lower-cased
	words     []string // its words
	repo      string
	paths     []string
	languages []string
	labels    []string
}

func checkContext(field string, tc *skillsv1.TaskContext) (*task, error) {
	if tc == nil {
		return nil, errs.Invalid(field, "required: the task the skills are for")
	}
	if err := validate.MaxLen(field+".description", tc.GetDescription(), 100_000); err != nil {
		return nil, err
	}
	if err := validate.Repo(field+".repo", tc.GetRepo(), false); err != nil {
		return nil, err
	}
	if len(tc.GetFilePaths()) > 5000 {
		return nil, errs.Invalid(field+".file_paths", "at most 5000 paths")
	}
	for i, p := range tc.GetFilePaths() {
		if err := validate.Path(fmt.Sprintf("%s.file_paths[%d]", field, i), p); err != nil {
			return nil, err
		}
	}
	t := &task{text: strings.ToLower(tc.GetDescription()), repo: tc.GetRepo(), paths: tc.GetFilePaths()}
	t.words = strings.FieldsFunc(t.text, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	for _, l := range tc.GetLanguages() {
		t.languages = appendNew(t.languages, strings.ToLower(strings.TrimSpace(l)))
	}
	if len(t.languages) == 0 {
		for _, p := range t.paths {
			if l := languageOf(p); l != "" {
				t.languages = appendNew(t.languages, l)
			}
		}
	}
	for _, l := range tc.GetLabels() {
		t.labels = appendNew(t.labels, strings.ToLower(strings.TrimSpace(l)))
	}
	return t, nil
}

func appendNew(xs []string, x string) []string {
	if x == "" || slices.Contains(xs, x) {
		return xs
	}
	return append(xs, x)
}

// languageOf is a path's language by extension.
func languageOf(p string) string {
	if l := detect.Language(p); l != "" {
		return l
	}
	switch strings.ToLower(path.Ext(p)) {
	case ".sql":
		return "sql"
	case ".sh", ".bash":
		return "shell"
	case ".rs":
		return "rust"
	case ".java":
		return "java"
	case ".rb":
		return "ruby"
	case ".c", ".h":
		return "c"
	case ".cc", ".cpp", ".hpp":
		return "cpp"
	case ".cs":
		return "csharp"
	case ".proto":
		return "protobuf"
	}
	return ""
}

// match is how a skill's routing fits a task.
type match struct {
	ok bool
	// strength is 0–1: 0.25 for a skill without rules (it fits every task, and says
	// little), else 1 − ½ⁿ for n matching rule lists, raised toward 1 by a keyword found
	// several times.
	strength float64
	reason   string
}

// route matches r against t: every non-empty list of r must match.
func route(r *skillsv1.SkillRouting, t *task) match {
	var reasons []string
	n := 0
	hits := 0
	if kws := r.GetKeywords(); len(kws) > 0 {
		var found []string
		for _, k := range kws {
			if c := keywordCount(strings.ToLower(k), t); c > 0 {
				hits += c
				found = append(found, fmt.Sprintf("keyword %q", k))
			}
		}
		if len(found) == 0 {
			return match{reason: "no keyword in the task"}
		}
		n++
		reasons = append(reasons, strings.Join(found, ", "))
	}
	if globs := r.GetFileGlobs(); len(globs) > 0 {
		hit := ""
		for _, g := range globs {
			for _, p := range t.paths {
				if glob.Match(g, p) {
					hit = fmt.Sprintf("glob %q (%s)", g, p)
					break
				}
			}
			if hit != "" {
				break
			}
		}
		if hit == "" {
			return match{reason: "no file matches its globs"}
		}
		n++
		reasons = append(reasons, hit)
	}
	type list struct {
		name        string
		want, given []string
	}
	for _, l := range []list{
		{"language", r.GetLanguages(), t.languages},
		{"repository", r.GetRepos(), []string{t.repo}},
		{"label", r.GetLabels(), t.labels},
	} {
		if len(l.want) == 0 {
			continue
		}
		hit := ""
		for _, w := range l.want {
			if slices.ContainsFunc(l.given, func(g string) bool { return g != "" && strings.EqualFold(g, w) }) {
				hit = fmt.Sprintf("%s %q", l.name, w)
				break
			}
		}
		if hit == "" {
			return match{reason: "no " + l.name + " of its routing"}
		}
		n++
		reasons = append(reasons, hit)
	}
	if n == 0 {
		return match{ok: true, strength: 0.25, reason: "no rules"}
	}
	strength := 1 - math.Pow(0.5, float64(n))
	if hits > 1 {
		strength += (1 - strength) * min(0.5, 0.1*float64(hits-1))
	}
	return match{ok: true, strength: strength, reason: strings.Join(reasons, ", ")}
}

// keywordCount counts the keyword in the task: a phrase as a substring, a word as a whole
// word (or its plural: "migration" finds "migrations").
func keywordCount(k string, t *task) int {
	if strings.ContainsFunc(k, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		return strings.Count(t.text, k)
	}
	c := 0
	for _, w := range t.words {
		if w == k || w == k+"s" || w == k+"es" || k == w+"s" {
			c++
		}
	}
	return c
}

// scored is a skill in scope with its match and score.
type scored struct {
	skill *skillsv1.Skill
	match match
	score float64
}

// candidates routes every skill in t's scope of the phase (UNSPECIFIED: every phase) and
// returns them by score, highest first (ties: priority, then name).
func (s *Server) candidates(ctx context.Context, t *task, phase skillsv1.SkillPhase) ([]scored, error) {
	skills, err := s.store.InScope(ctx, t.repo)
	if err != nil {
		return nil, err
	}
	var out []scored
	for _, sk := range skills {
		if phase != skillsv1.SkillPhase_SKILL_PHASE_UNSPECIFIED && sk.GetPhase() != phase {
			continue
		}
		m := route(sk.GetRouting(), t)
		out = append(out, scored{skill: sk, match: m, score: m.strength * float64(sk.GetPriority()) / 100 * sk.GetConfidence()})
	}
	slices.SortStableFunc(out, func(a, b scored) int {
		switch {
		case a.score != b.score:
			if a.score > b.score {
				return -1
			}
			return 1
		case a.skill.GetPriority() != b.skill.GetPriority():
			return int(b.skill.GetPriority() - a.skill.GetPriority())
		}
		return strings.Compare(a.skill.GetName(), b.skill.GetName())
	})
	return out, nil
}

// ResolveSkills picks the enabled skills matching a task within a token budget.
func (s *Server) ResolveSkills(ctx context.Context, req *skillsv1.ResolveSkillsRequest) (*skillsv1.ResolveSkillsResponse, error) {
	if _, err := auth.MustFromContext(ctx); err != nil {
		return nil, err
	}
	t, err := checkContext("context", req.GetContext())
	if err != nil {
		return nil, err
	}
	if err := validate.Enum("phase", req.GetPhase(), true); err != nil {
		return nil, err
	}
	budget := int32(defaultBudget)
	if req.TokenBudget != nil {
		if budget = req.GetTokenBudget(); budget <= 0 {
			return nil, errs.Invalid("token_budget", "%d: want a positive number of tokens (unset: %d)", budget, defaultBudget)
		}
	}
	cands, err := s.candidates(ctx, t, req.GetPhase())
	if err != nil {
		return nil, err
	}
	resp := &skillsv1.ResolveSkillsResponse{}
	left := budget
	for _, c := range cands {
		sk := c.skill
		skip := func(reason skillsv1.SkipReason, detail string) {
			resp.Skipped = append(resp.Skipped, &skillsv1.SkippedSkill{SkillId: sk.GetId(), Name: sk.GetName(), Reason: reason, Detail: detail})
		}
		switch {
		case !sk.GetEnabled():
			skip(skillsv1.SkipReason_SKIP_REASON_DISABLED, "disabled")
		case !c.match.ok:
			skip(skillsv1.SkipReason_SKIP_REASON_NO_MATCH, c.match.reason)
		case sk.GetTokens() > left:
			skip(skillsv1.SkipReason_SKIP_REASON_TOKEN_BUDGET, fmt.Sprintf("needs %d tokens, %d left", sk.GetTokens(), left))
		default:
			left -= sk.GetTokens()
			resp.TokensUsed += sk.GetTokens()
			resp.Selected = append(resp.Selected, &skillsv1.ResolvedSkill{SkillId: sk.GetId(), Name: sk.GetName(), Phase: sk.GetPhase(),
				PromptFragment: sk.GetPromptFragment(), Priority: sk.GetPriority(), Tokens: sk.GetTokens(), MatchReason: c.match.reason,
				Score: c.score, Confidence: sk.GetConfidence()})
		}
	}
	return resp, nil
}
