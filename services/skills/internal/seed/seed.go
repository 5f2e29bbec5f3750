// Package seed holds TheFold's built-in skills: the prompt fragments injected for Go,
// TypeScript, testing and SQL-migration tasks, and the deterministic checks run before
// (project-conventions) and after (security-review) the AI call.
//
// The prompt fragments live in fragments/*.md, embedded at build time, so they read as
// Markdown and can hold code spans.
package seed

import (
	_ "embed"
	"strings"

	skillsv1 "github.com/thefold/thefold/pkg/gen/thefold/skills/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

var (
	//go:embed fragments/go-service-conventions.md
	goServiceConventionsFragment string
	//go:embed fragments/go-error-handling.md
	goErrorHandlingFragment string
	//go:embed fragments/typescript-strictness.md
	typescriptStrictnessFragment string
	//go:embed fragments/testing-discipline.md
	testingDisciplineFragment string
	//go:embed fragments/sql-migrations.md
	sqlMigrationsFragment string
	//go:embed fragments/security-review.md
	securityReviewFragment string
)

// Builtin returns TheFold's built-in skills, fresh values on every call (callers may modify them).
// Server-set fields (id, tokens, counts, confidence, version, owner, times) are left empty.
func Builtin() []*skillsv1.Skill {
	return []*skillsv1.Skill{
		goServiceConventions(),
		goErrorHandling(),
		typescriptStrictness(),
		testingDiscipline(),
		sqlMigrations(),
		securityReview(),
		projectConventions(),
	}
}

func goServiceConventions() *skillsv1.Skill {
	return &skillsv1.Skill{
		Name:           "go-service-conventions",
		Description:    "Conventions for Go services: package layout, small consumer-side interfaces, context propagation, constructor injection, slog logging, validated configuration, graceful shutdown and race-checked tests.",
		Category:       skillsv1.SkillCategory_SKILL_CATEGORY_LANGUAGE,
		Phase:          skillsv1.SkillPhase_SKILL_PHASE_INJECT,
		PromptFragment: fragment(goServiceConventionsFragment),
		Routing:        &skillsv1.SkillRouting{Languages: []string{"go"}},
		Priority:       60,
		Enabled:        true,
		Scope:          skillsv1.SkillScope_SKILL_SCOPE_GLOBAL,
	}
}

func goErrorHandling() *skillsv1.Skill {
	return &skillsv1.Skill{
		Name:           "go-error-handling",
		Description:    "Idiomatic Go error handling: wrapping with %w once per layer, errors.Is and errors.As, sentinel and typed errors, no ignored errors or log-and-return, and gRPC status codes only at the edge.",
		Category:       skillsv1.SkillCategory_SKILL_CATEGORY_LANGUAGE,
		Phase:          skillsv1.SkillPhase_SKILL_PHASE_INJECT,
		PromptFragment: fragment(goErrorHandlingFragment),
		Routing:        &skillsv1.SkillRouting{Languages: []string{"go"}},
		Priority:       55,
		Enabled:        true,
		Scope:          skillsv1.SkillScope_SKILL_SCOPE_GLOBAL,
	}
}

func typescriptStrictness() *skillsv1.Skill {
	return &skillsv1.Skill{
		Name:           "typescript-strictness",
		Description:    "Strict TypeScript: strict compiler options, unknown instead of any, discriminated unions with exhaustive switches, readonly data, schema validation at boundaries and handled promises.",
		Category:       skillsv1.SkillCategory_SKILL_CATEGORY_LANGUAGE,
		Phase:          skillsv1.SkillPhase_SKILL_PHASE_INJECT,
		PromptFragment: fragment(typescriptStrictnessFragment),
		Routing:        &skillsv1.SkillRouting{Languages: []string{"typescript"}},
		Priority:       55,
		Enabled:        true,
		Scope:          skillsv1.SkillScope_SKILL_SCOPE_GLOBAL,
	}
}

func testingDiscipline() *skillsv1.Skill {
	return &skillsv1.Skill{
		Name:           "testing-discipline",
		Description:    "How to write tests that catch bugs: a failing test first for every bug, behaviour over implementation, table-driven and deterministic cases, real dependencies where cheap and clear got/want failures.",
		Category:       skillsv1.SkillCategory_SKILL_CATEGORY_QUALITY,
		Phase:          skillsv1.SkillPhase_SKILL_PHASE_INJECT,
		PromptFragment: fragment(testingDisciplineFragment),
		Routing: &skillsv1.SkillRouting{
			Keywords: []string{"test", "tests", "testing", "bug", "fix", "regression"},
		},
		Priority: 50,
		Enabled:  true,
		Scope:    skillsv1.SkillScope_SKILL_SCOPE_GLOBAL,
	}
}

// sqlMigrations routes on keywords only, so it applies to a task such as "add a SQL
// migration for users" whatever the repository's languages and before any file exists.
func sqlMigrations() *skillsv1.Skill {
	return &skillsv1.Skill{
		Name:           "sql-migrations",
		Description:    "Safe database schema migrations: forward-only numbered files, transactional expand/contract changes, online index builds, batched backfills, named constraints and migrations tested from empty and from the previous release.",
		Category:       skillsv1.SkillCategory_SKILL_CATEGORY_FRAMEWORK,
		Phase:          skillsv1.SkillPhase_SKILL_PHASE_INJECT,
		PromptFragment: fragment(sqlMigrationsFragment),
		Routing: &skillsv1.SkillRouting{
			Keywords: []string{"migration", "migrations", "schema", "sql"},
		},
		Priority: 70,
		Enabled:  true,
		Scope:    skillsv1.SkillScope_SKILL_SCOPE_GLOBAL,
	}
}

// securityReview has no routing, so it reviews the output of every task.
func securityReview() *skillsv1.Skill {
	return &skillsv1.Skill{
		Name:           "security-review",
		Description:    "Reviews produced code for security problems: hard-coded secrets, dangerous APIs, weak hashes, permissive CORS, committed key and environment files, and an OWASP-oriented AI review.",
		Category:       skillsv1.SkillCategory_SKILL_CATEGORY_SECURITY,
		Phase:          skillsv1.SkillPhase_SKILL_PHASE_POST_RUN,
		PromptFragment: fragment(securityReviewFragment),
		Routing:        &skillsv1.SkillRouting{},
		Rules: []*skillsv1.SkillRule{
			// Detectors keep their own per-finding severity (severity left unset).
			detector("secrets", "secrets", "a hard-coded secret in a known key format; remove it, rotate it, and load it from the environment or a secret manager"),
			detector("entropy", "entropy", "a high-entropy string literal that may be a credential; if it is a secret, move it out of the code and rotate it"),
			detector("dangerous-api", "dangerous-api", "a dangerous API: shelling out with interpolated input, eval, SQL built by concatenation, or TLS verification turned off"),
			{
				Id:        "todo-fixme-security",
				Kind:      skillsv1.SkillRuleKind_SKILL_RULE_KIND_REGEX,
				Pattern:   `(?i)\b(?:TODO|FIXME|XXX|HACK)\b[^\n]*\b(?:security|auth[a-z]*|password|secret|credential|csrf|xss|injection|sanitiz[a-z]*|insecure)`,
				FileGlobs: sourceGlobs(),
				Severity:  typev1.Severity_SEVERITY_WARNING,
				Message:   "a TODO/FIXME about security was left in the code; resolve it before merging or track it in an issue",
			},
			{
				Id:   "weak-hash",
				Kind: skillsv1.SkillRuleKind_SKILL_RULE_KIND_REGEX,
				Pattern: `\b(?:md5|sha1)\.(?:New|Sum)\b` + // Go crypto/md5, crypto/sha1
					`|\bhashlib\.(?:md5|sha1)\(` + // Python
					`|\bcreateHash\(\s*["'](?:md5|sha1)["']` + // Node.js crypto
					`|\bMessageDigest\.getInstance\(\s*"(?:MD5|SHA-?1)"`, // Java, Kotlin
				FileGlobs: []string{"**/*.go", "**/*.py", "**/*.js", "**/*.mjs", "**/*.cjs", "**/*.ts", "**/*.java", "**/*.kt"},
				Severity:  typev1.Severity_SEVERITY_WARNING,
				Message:   "MD5 or SHA-1 is broken for security use; use SHA-256 or HMAC-SHA-256 (argon2id or bcrypt for passwords) unless this is only a non-security checksum",
			},
			{
				Id:   "permissive-cors",
				Kind: skillsv1.SkillRuleKind_SKILL_RULE_KIND_REGEX,
				Pattern: `(?i)access-control-allow-origin["']?\s*[,:=]\s*["']\*["']` + // raw header, any language
					`|AllowedOrigins:\s*\[\]string\{\s*"\*"` + // Go rs/cors
					`|allow_origins\s*=\s*\[\s*["']\*["']` + // FastAPI / Starlette
					`|CORS_ALLOW_ALL_ORIGINS\s*=\s*True` + // django-cors-headers
					`|\borigin:\s*["']\*["']`, // Express cors, NestJS
				FileGlobs: sourceGlobs(),
				Severity:  typev1.Severity_SEVERITY_WARNING,
				Message:   "CORS allows any origin; restrict it to an allow-list of trusted origins, and never combine a wildcard or reflected origin with credentials",
			},
			glob("private-key-file", "**/*.pem", "a private key or certificate file is being committed; keep keys out of the repository and load them from a secret store"),
			glob("ssh-key-rsa", "**/id_rsa", "an SSH private key is being committed; keep keys out of the repository"),
			glob("ssh-key-ecdsa", "**/id_ecdsa", "an SSH private key is being committed; keep keys out of the repository"),
			glob("ssh-key-ed25519", "**/id_ed25519", "an SSH private key is being committed; keep keys out of the repository"),
			glob("env-file", "**/.env", "an environment file is being committed; .env files hold secrets and belong in .gitignore"),
		},
		Priority: 90,
		Enabled:  true,
		Scope:    skillsv1.SkillScope_SKILL_SCOPE_GLOBAL,
	}
}

// projectConventions has no routing and no prompt fragment: it detects the repository's
// toolchain and refuses tasks that target paths the agent must not read or write.
func projectConventions() *skillsv1.Skill {
	return &skillsv1.Skill{
		Name:        "project-conventions",
		Description: "Detects the repository's toolchain and conventions before the AI call and refuses tasks that target git internals, environment files or keys.",
		Category:    skillsv1.SkillCategory_SKILL_CATEGORY_GENERAL,
		Phase:       skillsv1.SkillPhase_SKILL_PHASE_PRE_RUN,
		Routing:     &skillsv1.SkillRouting{},
		Rules: []*skillsv1.SkillRule{
			{
				Id:       "toolchain",
				Kind:     skillsv1.SkillRuleKind_SKILL_RULE_KIND_DETECTOR,
				Pattern:  "toolchain",
				Severity: typev1.Severity_SEVERITY_INFO,
				Message:  "toolchain and conventions detected from the repository's files",
			},
			glob("git-internals", ".git/**", "the task targets git's internal files; change the repository through commits, never by editing .git"),
			glob("env-file", "**/.env", "the task targets an environment file; environment files hold secrets and must not be read or written by the agent"),
			glob("private-key-file", "**/*.pem", "the task targets a key or certificate file; keys must not be read or written by the agent"),
			glob("ssh-key-rsa", "**/id_rsa", "the task targets an SSH private key; keys must not be read or written by the agent"),
			glob("ssh-key-ecdsa", "**/id_ecdsa", "the task targets an SSH private key; keys must not be read or written by the agent"),
			glob("ssh-key-ed25519", "**/id_ed25519", "the task targets an SSH private key; keys must not be read or written by the agent"),
		},
		Priority: 80,
		Enabled:  true,
		Scope:    skillsv1.SkillScope_SKILL_SCOPE_GLOBAL,
	}
}

// fragment trims the embedded file's surrounding whitespace (its final newline).
func fragment(s string) string { return strings.TrimSpace(s) }

// detector is a DETECTOR rule; its severity is left unset so the detector's findings keep
// their own.
func detector(id, name, message string) *skillsv1.SkillRule {
	return &skillsv1.SkillRule{
		Id:      id,
		Kind:    skillsv1.SkillRuleKind_SKILL_RULE_KIND_DETECTOR,
		Pattern: name,
		Message: message,
	}
}

// glob is a GLOB rule of severity ERROR.
func glob(id, pattern, message string) *skillsv1.SkillRule {
	return &skillsv1.SkillRule{
		Id:       id,
		Kind:     skillsv1.SkillRuleKind_SKILL_RULE_KIND_GLOB,
		Pattern:  pattern,
		Severity: typev1.Severity_SEVERITY_ERROR,
		Message:  message,
	}
}

// sourceGlobs returns a new slice of globs for source files in common languages.
func sourceGlobs() []string {
	return []string{
		"**/*.go",
		"**/*.py",
		"**/*.js", "**/*.jsx", "**/*.mjs", "**/*.cjs",
		"**/*.ts", "**/*.tsx",
		"**/*.java", "**/*.kt",
		"**/*.rb", "**/*.php", "**/*.cs", "**/*.rs",
	}
}
