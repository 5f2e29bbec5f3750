package seed

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	skillsv1 "github.com/thefold/thefold/pkg/gen/thefold/skills/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"

	pathglob "github.com/thefold/thefold/services/skills/internal/glob"
)

var (
	kebabName = regexp.MustCompile(`^[a-z0-9]+(?:-[a-z0-9]+)*$`)
	ruleID    = regexp.MustCompile(`^[a-z0-9_/-]+$`)
	detectors = map[string]bool{"secrets": true, "entropy": true, "dangerous-api": true, "toolchain": true}
	languages = map[string]bool{"go": true, "typescript": true, "javascript": true, "python": true, "sql": true}
)

func byName(t *testing.T) map[string]*skillsv1.Skill {
	t.Helper()
	m := map[string]*skillsv1.Skill{}
	for _, s := range Builtin() {
		m[s.GetName()] = s
	}
	return m
}

func TestBuiltinNames(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range Builtin() {
		if !kebabName.MatchString(s.GetName()) {
			t.Errorf("name %q is not kebab-case", s.GetName())
		}
		if seen[s.GetName()] {
			t.Errorf("name %q is used twice", s.GetName())
		}
		seen[s.GetName()] = true
	}
}

func TestBuiltinExpectedSkills(t *testing.T) {
	const (
		inject  = skillsv1.SkillPhase_SKILL_PHASE_INJECT
		preRun  = skillsv1.SkillPhase_SKILL_PHASE_PRE_RUN
		postRun = skillsv1.SkillPhase_SKILL_PHASE_POST_RUN
	)
	tests := []struct {
		name     string
		phase    skillsv1.SkillPhase
		category skillsv1.SkillCategory
		priority int32
	}{
		{"go-service-conventions", inject, skillsv1.SkillCategory_SKILL_CATEGORY_LANGUAGE, 60},
		{"go-error-handling", inject, skillsv1.SkillCategory_SKILL_CATEGORY_LANGUAGE, 55},
		{"typescript-strictness", inject, skillsv1.SkillCategory_SKILL_CATEGORY_LANGUAGE, 55},
		{"testing-discipline", inject, skillsv1.SkillCategory_SKILL_CATEGORY_QUALITY, 50},
		{"sql-migrations", inject, skillsv1.SkillCategory_SKILL_CATEGORY_FRAMEWORK, 70},
		{"security-review", postRun, skillsv1.SkillCategory_SKILL_CATEGORY_SECURITY, 90},
		{"project-conventions", preRun, skillsv1.SkillCategory_SKILL_CATEGORY_GENERAL, 80},
	}
	skills := byName(t)
	if len(skills) != len(tests) {
		t.Errorf("Builtin() has %d skills, want %d", len(skills), len(tests))
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, ok := skills[tc.name]
			if !ok {
				t.Fatalf("Builtin() has no skill %q", tc.name)
			}
			if s.GetPhase() != tc.phase {
				t.Errorf("phase = %v, want %v", s.GetPhase(), tc.phase)
			}
			if s.GetCategory() != tc.category {
				t.Errorf("category = %v, want %v", s.GetCategory(), tc.category)
			}
			if s.GetPriority() != tc.priority {
				t.Errorf("priority = %d, want %d", s.GetPriority(), tc.priority)
			}
		})
	}
}

func TestBuiltinSkillFields(t *testing.T) {
	for _, s := range Builtin() {
		t.Run(s.GetName(), func(t *testing.T) {
			d := s.GetDescription()
			if d == "" {
				t.Error("description is empty")
			} else if !strings.HasSuffix(d, ".") || strings.Contains(strings.TrimSuffix(d, "."), ". ") {
				t.Errorf("description %q is not one sentence", d)
			}
			if s.GetCategory() == skillsv1.SkillCategory_SKILL_CATEGORY_UNSPECIFIED {
				t.Error("category is unspecified")
			}
			if s.GetPhase() == skillsv1.SkillPhase_SKILL_PHASE_UNSPECIFIED {
				t.Error("phase is unspecified")
			}
			if p := s.GetPriority(); p < 1 || p > 100 {
				t.Errorf("priority = %d, want 1-100", p)
			}
			if !s.GetEnabled() {
				t.Error("skill is disabled")
			}
			if s.GetScope() != skillsv1.SkillScope_SKILL_SCOPE_GLOBAL || s.GetRepo() != "" {
				t.Errorf("scope = %v, repo = %q; want GLOBAL without repo", s.GetScope(), s.GetRepo())
			}
			if s.GetId() != "" || s.GetTokens() != 0 || s.GetSuccessCount() != 0 || s.GetFailureCount() != 0 ||
				s.GetConfidence() != 0 || s.GetVersion() != 0 || s.GetOwnerId() != "" ||
				s.GetCreateTime() != nil || s.GetUpdateTime() != nil {
				t.Error("a server-set field is set")
			}
		})
	}
}

func TestInjectSkills(t *testing.T) {
	for _, s := range Builtin() {
		if s.GetPhase() != skillsv1.SkillPhase_SKILL_PHASE_INJECT {
			continue
		}
		t.Run(s.GetName(), func(t *testing.T) {
			f := s.GetPromptFragment()
			if n := len(strings.Fields(f)); n < 150 || n > 450 {
				t.Errorf("prompt fragment has %d words, want 150-450", n)
			}
			if !strings.Contains(f, "\n- ") {
				t.Error("prompt fragment has no Markdown bullets")
			}
			if f != strings.TrimSpace(f) {
				t.Error("prompt fragment has surrounding whitespace")
			}
			if len(s.GetRules()) != 0 {
				t.Errorf("INJECT skill has %d rules, want none", len(s.GetRules()))
			}
			if strings.Contains(strings.ToLower(f), "thefold") {
				t.Error("prompt fragment mentions TheFold; built-in guidance must fit any project")
			}
		})
	}
}

func TestCheckSkillsHaveRules(t *testing.T) {
	for _, s := range Builtin() {
		if p := s.GetPhase(); p == skillsv1.SkillPhase_SKILL_PHASE_PRE_RUN || p == skillsv1.SkillPhase_SKILL_PHASE_POST_RUN {
			if len(s.GetRules()) == 0 {
				t.Errorf("%s: %v skill has no rules", s.GetName(), p)
			}
		}
	}
}

func TestRules(t *testing.T) {
	for _, s := range Builtin() {
		ids := map[string]bool{}
		for _, r := range s.GetRules() {
			name := fmt.Sprintf("%s/%s", s.GetName(), r.GetId())
			if !ruleID.MatchString(r.GetId()) {
				t.Errorf("%s: rule id %q has characters other than a-z, 0-9, '-', '_', '/'", s.GetName(), r.GetId())
			}
			if ids[r.GetId()] {
				t.Errorf("%s: rule id %q is used twice", s.GetName(), r.GetId())
			}
			ids[r.GetId()] = true
			if strings.TrimSpace(r.GetMessage()) == "" {
				t.Errorf("%s: message is empty", name)
			}
			for _, g := range r.GetFileGlobs() {
				if err := pathglob.Validate(g); err != nil {
					t.Errorf("%s: file glob: %v", name, err)
				}
			}
			switch r.GetKind() {
			case skillsv1.SkillRuleKind_SKILL_RULE_KIND_REGEX, skillsv1.SkillRuleKind_SKILL_RULE_KIND_UNSPECIFIED:
				if _, err := regexp.Compile(r.GetPattern()); err != nil || r.GetPattern() == "" {
					t.Errorf("%s: pattern %q does not compile: %v", name, r.GetPattern(), err)
				}
			case skillsv1.SkillRuleKind_SKILL_RULE_KIND_DETECTOR:
				if !detectors[r.GetPattern()] {
					t.Errorf("%s: detector %q is not one of secrets, entropy, dangerous-api, toolchain", name, r.GetPattern())
				}
			case skillsv1.SkillRuleKind_SKILL_RULE_KIND_GLOB:
				if err := pathglob.Validate(r.GetPattern()); err != nil {
					t.Errorf("%s: %v", name, err)
				}
			default:
				t.Errorf("%s: unknown kind %v", name, r.GetKind())
			}
			if r.GetMustMatch() && r.GetKind() != skillsv1.SkillRuleKind_SKILL_RULE_KIND_REGEX {
				t.Errorf("%s: must_match is set on a %v rule", name, r.GetKind())
			}
		}
	}
}

func TestRouting(t *testing.T) {
	for _, s := range Builtin() {
		r := s.GetRouting()
		for _, l := range r.GetLanguages() {
			if !languages[l] {
				t.Errorf("%s: language %q is not a known lower-case language", s.GetName(), l)
			}
		}
		for _, k := range r.GetKeywords() {
			if k == "" || k != strings.ToLower(strings.TrimSpace(k)) {
				t.Errorf("%s: keyword %q is empty or not lower-case and trimmed", s.GetName(), k)
			}
		}
		for _, g := range r.GetFileGlobs() {
			if err := pathglob.Validate(g); err != nil {
				t.Errorf("%s: routing glob: %v", s.GetName(), err)
			}
		}
	}
}

func TestSQLMigrationsRouting(t *testing.T) {
	s := byName(t)["sql-migrations"]
	r := s.GetRouting()
	if !contains(r.GetKeywords(), "migration") {
		t.Errorf("keywords = %q, want them to contain %q", r.GetKeywords(), "migration")
	}
	if len(r.GetLanguages()) != 0 || len(r.GetFileGlobs()) != 0 || len(r.GetRepos()) != 0 || len(r.GetLabels()) != 0 {
		t.Errorf("routing = %v, want keywords only so it matches on any repository", r)
	}
	// The task from the brief must match on keywords alone.
	task := strings.ToLower("Add a SQL migration for users")
	matched := false
	for _, k := range r.GetKeywords() {
		if strings.Contains(task, k) {
			matched = true
		}
	}
	if !matched {
		t.Errorf("no keyword of %q is in %q", r.GetKeywords(), task)
	}
}

func TestGoSkillsRouteOnGo(t *testing.T) {
	skills := byName(t)
	for _, name := range []string{"go-service-conventions", "go-error-handling"} {
		r := skills[name].GetRouting()
		if got := r.GetLanguages(); len(got) != 1 || got[0] != "go" {
			t.Errorf("%s: languages = %q, want [go]", name, got)
		}
		if len(r.GetKeywords()) != 0 || len(r.GetFileGlobs()) != 0 {
			t.Errorf("%s: routing = %v, want languages only", name, r)
		}
	}
}

func TestUnroutedSkills(t *testing.T) {
	skills := byName(t)
	for _, name := range []string{"security-review", "project-conventions"} {
		r := skills[name].GetRouting()
		if len(r.GetKeywords())+len(r.GetFileGlobs())+len(r.GetLanguages())+len(r.GetRepos())+len(r.GetLabels()) != 0 {
			t.Errorf("%s: routing = %v, want none (every task)", name, r)
		}
	}
	if f := skills["project-conventions"].GetPromptFragment(); f != "" {
		t.Errorf("project-conventions prompt fragment = %q, want empty", f)
	}
	if f := skills["security-review"].GetPromptFragment(); !strings.Contains(f, "SSRF") || !strings.Contains(f, "Path traversal") {
		t.Error("security-review prompt fragment lacks the OWASP checklist")
	}
}

func TestRequiredRules(t *testing.T) {
	tests := []struct {
		skill, id string
		kind      skillsv1.SkillRuleKind
		pattern   string
		severity  typev1.Severity
	}{
		{"security-review", "secrets", skillsv1.SkillRuleKind_SKILL_RULE_KIND_DETECTOR, "secrets", typev1.Severity_SEVERITY_UNSPECIFIED},
		{"security-review", "entropy", skillsv1.SkillRuleKind_SKILL_RULE_KIND_DETECTOR, "entropy", typev1.Severity_SEVERITY_UNSPECIFIED},
		{"security-review", "dangerous-api", skillsv1.SkillRuleKind_SKILL_RULE_KIND_DETECTOR, "dangerous-api", typev1.Severity_SEVERITY_UNSPECIFIED},
		{"security-review", "todo-fixme-security", skillsv1.SkillRuleKind_SKILL_RULE_KIND_REGEX, "", typev1.Severity_SEVERITY_WARNING},
		{"security-review", "private-key-file", skillsv1.SkillRuleKind_SKILL_RULE_KIND_GLOB, "**/*.pem", typev1.Severity_SEVERITY_ERROR},
		{"security-review", "ssh-key-rsa", skillsv1.SkillRuleKind_SKILL_RULE_KIND_GLOB, "**/id_rsa", typev1.Severity_SEVERITY_ERROR},
		{"security-review", "env-file", skillsv1.SkillRuleKind_SKILL_RULE_KIND_GLOB, "**/.env", typev1.Severity_SEVERITY_ERROR},
		{"project-conventions", "toolchain", skillsv1.SkillRuleKind_SKILL_RULE_KIND_DETECTOR, "toolchain", typev1.Severity_SEVERITY_INFO},
		{"project-conventions", "git-internals", skillsv1.SkillRuleKind_SKILL_RULE_KIND_GLOB, ".git/**", typev1.Severity_SEVERITY_ERROR},
		{"project-conventions", "env-file", skillsv1.SkillRuleKind_SKILL_RULE_KIND_GLOB, "**/.env", typev1.Severity_SEVERITY_ERROR},
		{"project-conventions", "private-key-file", skillsv1.SkillRuleKind_SKILL_RULE_KIND_GLOB, "**/*.pem", typev1.Severity_SEVERITY_ERROR},
		{"project-conventions", "ssh-key-rsa", skillsv1.SkillRuleKind_SKILL_RULE_KIND_GLOB, "**/id_rsa", typev1.Severity_SEVERITY_ERROR},
	}
	skills := byName(t)
	for _, tc := range tests {
		t.Run(tc.skill+"/"+tc.id, func(t *testing.T) {
			r := findRule(skills[tc.skill], tc.id)
			if r == nil {
				t.Fatalf("%s has no rule %q", tc.skill, tc.id)
			}
			if r.GetKind() != tc.kind {
				t.Errorf("kind = %v, want %v", r.GetKind(), tc.kind)
			}
			if tc.pattern != "" && r.GetPattern() != tc.pattern {
				t.Errorf("pattern = %q, want %q", r.GetPattern(), tc.pattern)
			}
			if r.GetSeverity() != tc.severity {
				t.Errorf("severity = %v, want %v", r.GetSeverity(), tc.severity)
			}
		})
	}
}

func TestRegexRulesMatch(t *testing.T) {
	tests := []struct {
		id    string
		input string
		want  bool
	}{
		{"todo-fixme-security", "// TODO: add an auth check before deleting", true},
		{"todo-fixme-security", "# FIXME password is compared with ==", true},
		{"todo-fixme-security", "// todo: sanitize the file name", true},
		{"todo-fixme-security", "// TODO: rename this function", false},
		{"todo-fixme-security", "// TODO: rename\nvalidatePassword(p)", false},
		{"todo-fixme-security", "const authTodo = 1 // security", false},
		{"weak-hash", "sum := md5.Sum(data)", true},
		{"weak-hash", "h := sha1.New()", true},
		{"weak-hash", "digest = hashlib.md5(body).hexdigest()", true},
		{"weak-hash", "crypto.createHash('sha1').update(x)", true},
		{"weak-hash", `MessageDigest.getInstance("SHA-1")`, true},
		{"weak-hash", "sum := sha256.Sum256(data)", false},
		{"weak-hash", "hashlib.sha256(body)", false},
		{"weak-hash", "crypto.createHash('sha256')", false},
		{"permissive-cors", `w.Header().Set("Access-Control-Allow-Origin", "*")`, true},
		{"permissive-cors", `res.setHeader('access-control-allow-origin', '*')`, true},
		{"permissive-cors", `cors.New(cors.Options{AllowedOrigins: []string{"*"}})`, true},
		{"permissive-cors", `app.add_middleware(CORSMiddleware, allow_origins=["*"])`, true},
		{"permissive-cors", `CORS_ALLOW_ALL_ORIGINS = True`, true},
		{"permissive-cors", `app.use(cors({ origin: "*" }))`, true},
		{"permissive-cors", `w.Header().Set("Access-Control-Allow-Origin", "https://app.example.com")`, false},
		{"permissive-cors", `cors.New(cors.Options{AllowedOrigins: []string{"https://example.com"}})`, false},
		{"permissive-cors", `app.use(cors({ origin: ["https://example.com"] }))`, false},
	}
	sec := byName(t)["security-review"]
	for _, tc := range tests {
		t.Run(tc.id, func(t *testing.T) {
			r := findRule(sec, tc.id)
			if r == nil {
				t.Fatalf("security-review has no rule %q", tc.id)
			}
			re := regexp.MustCompile(r.GetPattern())
			if got := re.MatchString(tc.input); got != tc.want {
				t.Errorf("%s matches %q = %v, want %v", tc.id, tc.input, got, tc.want)
			}
		})
	}
}

func TestGlobRulesMatch(t *testing.T) {
	tests := []struct {
		skill, id, path string
		want            bool
	}{
		{"project-conventions", "git-internals", ".git/config", true},
		{"project-conventions", "git-internals", ".git/hooks/pre-commit", true},
		{"project-conventions", "git-internals", ".github/workflows/ci.yml", false},
		{"project-conventions", "git-internals", ".gitignore", false},
		{"project-conventions", "env-file", ".env", true},
		{"project-conventions", "env-file", "deploy/prod/.env", true},
		{"project-conventions", "env-file", "src/env.ts", false},
		{"project-conventions", "private-key-file", "certs/server.pem", true},
		{"project-conventions", "private-key-file", "server.pem", true},
		{"project-conventions", "private-key-file", "docs/pem-format.md", false},
		{"project-conventions", "ssh-key-rsa", "home/.ssh/id_rsa", true},
		{"project-conventions", "ssh-key-rsa", "home/.ssh/id_rsa.pub", false},
		{"project-conventions", "env-file", ".env.example", false},
		{"project-conventions", "ssh-key-ed25519", "id_ed25519", true},
		{"security-review", "env-file", "services/api/.env", true},
		{"security-review", "env-file", ".env.example", false},
		{"security-review", "private-key-file", "tls/key.pem", true},
		{"security-review", "ssh-key-ecdsa", "keys/id_ecdsa", true},
		{"security-review", "ssh-key-rsa", "internal/rsa/key.go", false},
	}
	skills := byName(t)
	for _, tc := range tests {
		t.Run(tc.skill+"/"+tc.id, func(t *testing.T) {
			r := findRule(skills[tc.skill], tc.id)
			if r == nil {
				t.Fatalf("%s has no rule %q", tc.skill, tc.id)
			}
			if got := pathglob.Match(r.GetPattern(), tc.path); got != tc.want {
				t.Errorf("glob %q matches %q = %v, want %v", r.GetPattern(), tc.path, got, tc.want)
			}
		})
	}
}

func TestBuiltinReturnsFreshValues(t *testing.T) {
	want := fingerprint(Builtin())

	first := Builtin()
	for _, s := range first {
		s.Name += "-changed"
		s.PromptFragment = "changed"
		s.Enabled = false
		s.Routing.Keywords = append(s.Routing.Keywords, "changed")
		for i := range s.Routing.Languages {
			s.Routing.Languages[i] = "changed"
		}
		for i := range s.Routing.Keywords {
			s.Routing.Keywords[i] = "changed"
		}
		for _, r := range s.Rules {
			r.Pattern = "changed"
			r.Message = "changed"
			for i := range r.FileGlobs {
				r.FileGlobs[i] = "changed"
			}
		}
		if len(s.Rules) > 0 {
			s.Rules[0] = &skillsv1.SkillRule{Id: "changed"}
		}
		s.Rules = append(s.Rules, &skillsv1.SkillRule{Id: "added"})
	}
	first[0] = &skillsv1.Skill{Name: "replaced"}

	if got := fingerprint(Builtin()); got != want {
		t.Errorf("Builtin() after mutating an earlier result differs:\n got %s\nwant %s", got, want)
	}
}

// fingerprint renders every field of the skills deterministically.
func fingerprint(skills []*skillsv1.Skill) string {
	var b strings.Builder
	for _, s := range skills {
		r := s.GetRouting()
		fmt.Fprintf(&b, "%q %q %v %v %q %d %v %v|%q %q %q %q %q\n",
			s.GetName(), s.GetDescription(), s.GetCategory(), s.GetPhase(), s.GetPromptFragment(),
			s.GetPriority(), s.GetEnabled(), s.GetScope(),
			r.GetKeywords(), r.GetFileGlobs(), r.GetLanguages(), r.GetRepos(), r.GetLabels())
		for _, rule := range s.GetRules() {
			fmt.Fprintf(&b, "  %q %v %q %v %q %q %v\n", rule.GetId(), rule.GetKind(), rule.GetPattern(),
				rule.GetMustMatch(), rule.GetFileGlobs(), rule.GetMessage(), rule.GetSeverity())
		}
	}
	return b.String()
}

func findRule(s *skillsv1.Skill, id string) *skillsv1.SkillRule {
	for _, r := range s.GetRules() {
		if r.GetId() == id {
			return r
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
