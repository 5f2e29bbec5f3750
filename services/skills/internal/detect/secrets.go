package detect

import (
	"encoding/base64"
	"fmt"
	"path"
	"regexp"
	"strings"

	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// secretFormat is a credential with a recognisable format.
type secretFormat struct {
	rule string
	what string
	re   *regexp.Regexp
	// tail is the alphabet the token is drawn from when the expression cannot express
	// the end of the token itself (RE2 has no look-ahead): a match followed by a byte of
	// tail is part of a longer string and not the token.
	tail string
	// check, when set, must accept the match.
	check func(src string, m []int) bool
	// need are literals of which every match of re contains one: a source without any of
	// them is not searched with re. Most expressions begin with \b, which keeps the regexp
	// package from skipping ahead to a literal prefix itself, and run position by position
	// over the whole file; strings.Contains skips the files that cannot match (nearly all).
	need []string
}

// Alphabets used to check where a token ends.
const (
	alnum     = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	alnumDash = alnum + "_-"
)

// secretFormats are the known credential formats. Every one of them is specific enough
// that a match is almost certainly a real credential, unless it is a placeholder.
var secretFormats = []secretFormat{
	{rule: "secrets/aws-access-key", what: "AWS access key id", re: regexp.MustCompile(`\b(?:AKIA|ASIA)[A-Z0-9]{16}\b`), need: []string{"AKIA", "ASIA"}},
	{rule: "secrets/github-token", what: "GitHub token", re: regexp.MustCompile(`\bgh[pousr]_[A-Za-z0-9]{36}\b`), need: []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_"}},
	{rule: "secrets/github-token", what: "GitHub fine-grained token", re: regexp.MustCompile(`\bgithub_pat_[A-Za-z0-9_]{82}\b`), need: []string{"github_pat_"}},
	{rule: "secrets/slack-token", what: "Slack token", re: regexp.MustCompile(`\bxox[baprs]-[0-9]{8,}-[0-9A-Za-z-]{8,}`), tail: alnumDash, need: []string{"xox"}},
	{rule: "secrets/slack-webhook", what: "Slack webhook URL", re: regexp.MustCompile(`https://hooks\.slack\.com/services/T[A-Z0-9]{8,}/B[A-Z0-9]{8,}/[A-Za-z0-9]{20,}`), need: []string{"https://hooks.slack.com/services/T"}},
	{rule: "secrets/stripe-key", what: "Stripe live key", re: regexp.MustCompile(`\b[sr]k_live_[0-9A-Za-z]{24,}\b`), need: []string{"k_live_"}},
	{rule: "secrets/google-api-key", what: "Google API key", re: regexp.MustCompile(`\bAIza[0-9A-Za-z_-]{35}`), tail: alnumDash, need: []string{"AIza"}},
	{rule: "secrets/anthropic-key", what: "Anthropic API key", re: regexp.MustCompile(`\bsk-ant-[A-Za-z0-9_-]{32,}`), tail: alnumDash, need: []string{"sk-ant-"}},
	{rule: "secrets/openai-key", what: "OpenAI API key", re: regexp.MustCompile(`\bsk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}`), tail: alnumDash, check: mixedToken, need: []string{"sk-proj-", "sk-svcacct-", "sk-admin-"}},
	{rule: "secrets/openai-key", what: "OpenAI API key", re: regexp.MustCompile(`\bsk-[A-Za-z0-9]{32,}\b`), check: mixedToken, need: []string{"sk-"}},
	{rule: "secrets/private-key", what: "private key", re: regexp.MustCompile(`-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----`), check: hasKeyMaterial, need: []string{"PRIVATE KEY"}},
	{rule: "secrets/jwt", what: "JWT", re: regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{16,}`), tail: alnumDash, check: jwtHeader, need: []string{"eyJ"}},
}

// mixedToken accepts a match whose text has both a digit and a letter, as every
// generated key does and a kebab-case word does not.
func mixedToken(src string, m []int) bool {
	s := src[m[0]:m[1]]
	return strings.ContainsAny(s, "0123456789") && strings.ContainsAny(s, alnum[:52])
}

// keyMaterialRe is a run of base64 long enough to be part of a PEM body.
var keyMaterialRe = regexp.MustCompile(`[A-Za-z0-9+/=]{40,}`)

// hasKeyMaterial accepts a private-key header only when key material follows it (on the
// same line, after escaped newlines, or within the next few lines). A bare header is
// code that recognises or writes PEM, not a leaked key.
func hasKeyMaterial(src string, m []int) bool {
	rest := src[m[1]:]
	lines := strings.SplitN(rest, "\n", 6)
	for _, l := range lines {
		l = strings.ReplaceAll(l, `\n`, " ")
		if strings.Contains(l, "-----END") {
			l = l[:strings.Index(l, "-----END")]
			return keyMaterialRe.MatchString(l)
		}
		if keyMaterialRe.MatchString(l) {
			return true
		}
	}
	return false
}

// jwtHeader accepts a JWT whose first segment decodes to a JSON header naming an
// algorithm or a type, as real tokens do.
func jwtHeader(src string, m []int) bool {
	seg, _, _ := strings.Cut(src[m[0]:m[1]], ".")
	h, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(seg, "="))
	if err != nil {
		return false
	}
	return strings.Contains(string(h), `"alg"`) || strings.Contains(string(h), `"typ"`)
}

// placeholderMarkers are substrings (matched case-insensitively) that mark a value as a
// placeholder or documentation example rather than a real credential.
var placeholderMarkers = []string{"example", "xxx", "your_", "your-", "changeme", "change_me", "change-me", "placeholder", "redacted", "***", "${", "{{", "…", "..."}

// isPlaceholder reports whether a credential-shaped value is a placeholder: one of the
// markers, a <...> template, or an obviously fabricated sequence (a run of six equal or
// consecutive characters, as in "000000" or "123456", never occurs in a generated key).
func isPlaceholder(v string) bool {
	l := strings.ToLower(v)
	for _, m := range placeholderMarkers {
		if strings.Contains(l, m) {
			return true
		}
	}
	if i := strings.IndexByte(v, '<'); i >= 0 && strings.IndexByte(v[i:], '>') > 0 {
		return true
	}
	return runLength(v) >= 6
}

// runLength is the length of the longest run of equal or consecutively ascending bytes
// in s ("aaaa", "abcd", "1234").
func runLength(s string) int {
	best, eq, asc := 0, 1, 1
	for i := 1; i < len(s); i++ {
		if s[i] == s[i-1] {
			eq++
		} else {
			eq = 1
		}
		if s[i] == s[i-1]+1 {
			asc++
		} else {
			asc = 1
		}
		best = max(best, eq, asc)
	}
	if len(s) > 0 {
		best = max(best, 1)
	}
	return best
}

// credentialSuffixes are the normalised name endings (lower case, without '_', '-' and
// '.') of variables and keys that hold a credential.
var credentialSuffixes = []string{
	"password", "passwd", "passphrase", "secret", "token", "apikey", "accesskey", "secretkey",
	"privatekey", "clientsecret", "authkey", "signingkey", "credential", "credentials",
}

// notCredentialSuffixes are names ending like a credential that hold something else:
// pagination and synchronisation cursors are opaque but not secret.
var notCredentialSuffixes = []string{"pagetoken", "continuationtoken", "synctoken", "cursortoken", "resumetoken"}

// normName lower-cases a name and drops the separators '_', '-' and '.'.
func normName(name string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r == '-' || r == '.' {
			return -1
		}
		return r
	}, strings.ToLower(name))
}

// isCredentialName reports whether a variable or key name says it holds a credential.
// Only the end of the name counts: "dbPassword" does, "passwordHint" and "tokenURL" do
// not.
func isCredentialName(name string) bool {
	n := normName(name)
	for _, s := range notCredentialSuffixes {
		if strings.HasSuffix(n, s) {
			return false
		}
	}
	for _, s := range credentialSuffixes {
		if strings.HasSuffix(n, s) {
			return true
		}
	}
	return false
}

var (
	// envNameRe is an environment variable name, which code often stores in a variable
	// named like the secret it reads ("tokenEnv = "GITHUB_TOKEN"").
	envNameRe = regexp.MustCompile(`^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$`)
	// identLikeRe is a name made of words ("session_token", "X-Auth-Token",
	// "errors.invalid_token"): a cookie, header, field or message key, not a password.
	identLikeRe = regexp.MustCompile(`^[A-Za-z][a-z0-9]*(?:[_.-][A-Za-z][a-z0-9]*)+$`)
	// dottedNameRe is a qualified identifier ("expr.KindToken", "auth.invalidToken").
	dottedNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+$`)
	// formatVerbRe is a printf verb or a str.format field: the value is a template.
	formatVerbRe = regexp.MustCompile(`%[-+# 0-9.]*[sdvqxXf]|\{\d*\}`)
)

// devDefaults are well-known local-development values that are not secrets in any
// meaningful sense; flagging them would flag every docker-compose file.
var devDefaults = map[string]bool{
	"password": true, "secret": true, "postgres": true, "mysql": true, "admin": true, "root": true,
	"guest": true, "default": true, "development": true, "localhost": true, "changeit": true,
}

// genericSkip reports whether a value assigned to a credential-named variable is not a
// hard-coded credential: too short, a placeholder, a test value, a template, a path or
// URL, an environment variable name, a word-like identifier, or a development default.
func genericSkip(name, v string) bool {
	if len(v) < 8 || strings.ContainsAny(v, " \t") || strings.Contains(v, `\n`) || strings.Contains(v, `\u`) || strings.Contains(v, `\x`) || isPlaceholder(v) {
		return true
	}
	l := strings.ToLower(v)
	// Values that say what they are ("mysecretpassword", "supersecrettoken",
	// "smithy.api#httpApiKeyAuth") are examples or names; so are test values and
	// references to where the real value lives.
	n := normName(v)
	for _, m := range credentialSuffixes {
		if strings.Contains(n, m) {
			return true
		}
	}
	for _, m := range []string{"test", "dummy", "fake", "sample", "mock", "getenv", "process.env", "environ", "vault:"} {
		if strings.Contains(l, m) {
			return true
		}
	}
	switch {
	case formatVerbRe.MatchString(v),
		strings.HasPrefix(v, "$"), // a shell or CI variable
		strings.HasPrefix(v, "/"), strings.HasPrefix(v, "./"), strings.HasPrefix(v, "../"), strings.HasPrefix(v, "~/"),
		strings.Contains(v, "://"),
		envNameRe.MatchString(v), identLikeRe.MatchString(v), dottedNameRe.MatchString(v),
		devDefaults[l], strings.Contains(normName(v), normName(name)):
		return true
	}
	return runLength(v) == len(v)
}

// assignment is a string value assigned to a name, in any language.
type assignment struct {
	name  string
	value string
	off   int // offset of the value's first byte
}

// configValueRe is an unquoted "name = value" or "name: value" line of a configuration
// file (.env, YAML, INI, shell).
var configValueRe = regexp.MustCompile(`(?m)^[ \t]*(?:export[ \t]+|ENV[ \t]+|-[ \t]+)?([A-Za-z_][A-Za-z0-9_.-]*)[ \t]*[:=][ \t]*([^\s#'"]+)[ \t]*(?:#.*)?$`)

// isConfigFile reports whether p is a configuration or shell file, whose values are
// often unquoted.
func isConfigFile(p string) bool {
	base := strings.ToLower(path.Base(p))
	if base == ".env" || strings.HasPrefix(base, ".env.") {
		return true
	}
	switch path.Ext(base) {
	case ".env", ".ini", ".cfg", ".conf", ".properties", ".yaml", ".yml", ".sh", ".bash", ".zsh":
		return true
	}
	return false
}

// assignments finds string values assigned to a name: quoted literals after
// "name =", "name :=", "name:" or "\"name\":" (with an optional type annotation) in any
// language, and unquoted values in configuration files.
func assignments(f File) []assignment {
	var out []assignment
	src := f.Content
	for _, s := range scanLiterals(src) {
		if name, ok := assignedName(linePrefix(src, s.start)); ok {
			out = append(out, assignment{name: name, value: s.body(src), off: s.bodyStart})
		}
	}
	if isConfigFile(f.Path) {
		for _, m := range configValueRe.FindAllStringSubmatchIndex(src, -1) {
			out = append(out, assignment{name: src[m[2]:m[3]], value: src[m[4]:m[5]], off: m[4]})
		}
	}
	return out
}

// linePrefix returns the text of the line before offset off, at most 256 bytes of it:
// enough for a name and an operator, and bounded so a giant line stays linear.
func linePrefix(src string, off int) string {
	from := max(0, off-256)
	if i := strings.LastIndexByte(src[from:off], '\n'); i >= 0 {
		from += i + 1
	}
	return src[from:off]
}

// declKeywords may precede a name in a declaration; they are never a type.
var declKeywords = map[string]bool{"var": true, "const": true, "let": true, "val": true, "export": true, "readonly": true, "static": true, "private": true, "public": true, "protected": true, "final": true, "def": true, "return": true}

// assignedName returns the name a literal is assigned to, given the text of its line
// before the literal: "password = ", "token := ", "\"apiKey\": ", "var key string = ",
// "password: str = ", "cfg[\"token\"] = ". Comparisons ("==", "!=") are not
// assignments.
func assignedName(prefix string) (string, bool) {
	p := strings.TrimRight(prefix, " \t")
	isKey := false
	switch {
	case strings.HasSuffix(p, ":="):
		p = p[:len(p)-2]
	case strings.HasSuffix(p, "="):
		p = p[:len(p)-1]
		if p != "" && strings.IndexByte("=!<>", p[len(p)-1]) >= 0 {
			return "", false
		}
		if p != "" && strings.IndexByte("+-*/%&|^?", p[len(p)-1]) >= 0 {
			p = p[:len(p)-1]
		}
	case strings.HasSuffix(p, ":"):
		p, isKey = p[:len(p)-1], true
	default:
		return "", false
	}
	p = strings.TrimRight(p, " \t")
	p = strings.TrimSuffix(p, "]")
	p = strings.TrimRight(p, "\"'`")
	name := trailingName(p)
	if name == "" {
		return "", false
	}
	if b := len(p) - len(name); b > 0 && (p[b-1] == '/' || p[b-1] == '\\') {
		return "", false // a path used as a key ("etc/passwd"), not a name
	}
	if !isKey {
		// "name: Type =" (TypeScript, Python) or "name Type =" (Go): the last word is a type.
		before := strings.TrimRight(p[:len(p)-len(name)], " \t")
		switch {
		case strings.HasSuffix(before, ":"):
			if n := trailingName(strings.TrimRight(before[:len(before)-1], " \t")); n != "" {
				name = n
			}
		case len(before) < len(p)-len(name) && before != "":
			if n := trailingName(before); n != "" && !declKeywords[n] && !strings.ContainsAny(n, ".") {
				name = n
			}
		}
	}
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		name = name[i+1:]
	}
	return name, name != ""
}

// trailingName returns the name (identifier characters, '-', '.', and Go type syntax
// "[]*") ending s.
func trailingName(s string) string {
	i := len(s)
	for i > 0 {
		c := s[i-1]
		if isIdentByte(c) || c == '-' || c == '.' || c == '[' || c == ']' || c == '*' {
			i--
			continue
		}
		break
	}
	return strings.TrimLeft(s[i:], "-.[]*")
}

// detectSecrets finds credentials in known formats and credential-named variables and
// keys assigned a literal. It reads comments too: a key in a comment is just as leaked.
//
// Known gaps: a credential split across several literals or lines, values assigned via a
// function call, and formats not listed in secretFormats (the entropy detector covers
// part of those).
func detectSecrets(f File) []Finding {
	src := f.Content
	li := newLineIndex(src)
	var out []Finding
	var spans [][2]int
	for _, p := range secretFormats {
		if !containsAny(src, p.need) {
			continue
		}
		for _, m := range p.re.FindAllStringIndex(src, -1) {
			if p.tail != "" && m[1] < len(src) && strings.IndexByte(p.tail, src[m[1]]) >= 0 {
				continue
			}
			if p.check != nil && !p.check(src, m) {
				continue
			}
			s := src[m[0]:m[1]]
			if isPlaceholder(s) {
				continue
			}
			msg := fmt.Sprintf("hard-coded %s %s: anyone who can read the code can use it; load it from the environment or a secret manager", p.what, mask(s))
			if p.rule == "secrets/private-key" {
				msg = "hard-coded private key block: anyone who can read the code can impersonate its owner; load it from a file or a secret manager"
			}
			out = append(out, li.finding(m[0], p.rule, typev1.Severity_SEVERITY_ERROR, msg))
			spans = append(spans, [2]int{m[0], m[1]})
		}
	}
	overlaps := func(s, e int) bool {
		for _, sp := range spans {
			if s < sp[1] && sp[0] < e {
				return true
			}
		}
		return false
	}
	// Credential-named literals in tests are fixtures and in documentation examples;
	// known formats are still reported there, since a real key is leaked anywhere.
	testFile := isTestFile(f.Path) || isDocPath(f.Path)
	for _, a := range assignments(f) {
		if overlaps(a.off, a.off+len(a.value)) {
			continue // already reported in its specific format
		}
		n := normName(a.name)
		if (strings.HasSuffix(n, "secretaccesskey") || strings.HasSuffix(n, "awssecretkey")) && awsSecretRe.MatchString(a.value) {
			if !isPlaceholder(a.value) {
				out = append(out, li.finding(a.off, "secrets/aws-secret-key", typev1.Severity_SEVERITY_ERROR,
					fmt.Sprintf("hard-coded AWS secret access key %s in %q: anyone who can read the code can use it; load it from the environment or a secret manager", mask(a.value), a.name)))
			}
			continue
		}
		if testFile || !isCredentialName(a.name) || genericSkip(a.name, a.value) {
			continue
		}
		out = append(out, li.finding(a.off, "secrets/hard-coded-credential", typev1.Severity_SEVERITY_ERROR,
			fmt.Sprintf("%q is assigned the literal %s: a credential in source code is leaked to everyone who can read it; read it from the environment or a secret manager", a.name, mask(a.value))))
	}
	return out
}

// containsAny reports whether s contains one of subs.
func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// awsSecretRe is the shape of an AWS secret access key.
var awsSecretRe = regexp.MustCompile(`^[A-Za-z0-9/+=]{40}$`)
