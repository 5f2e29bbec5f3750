package detect

import (
	"encoding/base64"
	"fmt"
	"go/scanner"
	"go/token"
	"math"
	"path"
	"regexp"
	"strings"

	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// Entropy thresholds, in bits per character (Shannon entropy over bytes). A random
// base64 string of 32 characters scores about 4.5-4.7 and English or identifiers stay
// below 4; hex has at most 4 bits per character, and random hex of 32+ characters scores
// well above 3.
const (
	base64Threshold = 4.2
	hexThreshold    = 3.0
	// minCredentialLen is the shortest literal considered when its name says it holds
	// a credential; minAnonymousLen applies otherwise.
	minCredentialLen = 20
	minAnonymousLen  = 32
	minHexLen        = 32
)

// entropySkipFiles are files whose content is hashes and checksums by design.
var entropySkipFiles = map[string]bool{
	"go.sum": true, "go.work.sum": true, "package-lock.json": true, "npm-shrinkwrap.json": true,
	"yarn.lock": true, "pnpm-lock.yaml": true, "Cargo.lock": true, "poetry.lock": true,
	"Pipfile.lock": true, "composer.lock": true, "Gemfile.lock": true, "uv.lock": true,
}

// skipEntropy reports whether the entropy detector ignores p: lock and checksum files,
// minified JavaScript, and tests and test data (see isTestFile), which hold test vectors
// and fake credentials.
func skipEntropy(p string) bool {
	base := path.Base(p)
	return entropySkipFiles[base] || strings.HasSuffix(base, ".min.js") || isTestFile(p) || isDocPath(p)
}

// isTestFile reports whether p is a test or test data in the usual conventions of the
// languages checked: Go *_test.go and testdata/, JavaScript and TypeScript *.test.* and
// *.spec.*, Python test_*.py and *_test.py.
func isTestFile(p string) bool {
	base := path.Base(p)
	switch {
	case isTestPath(p):
		return true
	case Language(p) == "javascript" || Language(p) == "typescript":
		return strings.Contains(base, ".test.") || strings.Contains(base, ".spec.")
	case Language(p) == "python":
		return strings.HasPrefix(base, "test_") || strings.HasSuffix(base, "_test.py")
	}
	return false
}

var (
	// uuidRe is a UUID: random-looking, but an identifier.
	uuidRe = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	// base64ishRe is the alphabet of base64, base64url and hex. Anything else (spaces,
	// dots, colons, backslashes) means text, a path, a URL or an escaped byte string.
	base64ishRe = regexp.MustCompile(`^[A-Za-z0-9+/=_-]+$`)
	hexRe       = regexp.MustCompile(`^[0-9a-fA-F]+$`)
)

// dataPrefixes start base64 encodings of file formats (PNG, JPEG, GIF, PDF, zip, SVG,
// XML) and subresource-integrity hashes: embedded data, not secrets.
var dataPrefixes = []string{"iVBORw0KGgo", "/9j/", "R0lGOD", "JVBERi0", "UEsDB", "PHN2Zy", "PD94bWw", "sha256-", "sha384-", "sha512-"}

// digestNameParts mark a name whose value is random-looking by design but not secret:
// a digest, checksum, revision or identifier, a public key or certificate, an example.
var digestNameParts = []string{"sha", "md5", "hash", "digest", "checksum", "commit", "revision", "etag", "fingerprint", "integrity", "want", "expected", "golden", "uuid", "guid", "version", "public", "pubkey", "cert", "example", "sample"}

// isDigestName reports whether a name says its value is a digest or an identifier,
// which are random-looking by design.
func isDigestName(name string) bool {
	n := normName(name)
	if n == "" {
		return false
	}
	for _, p := range digestNameParts {
		if strings.Contains(n, p) {
			return true
		}
	}
	return strings.HasSuffix(n, "id") || strings.HasSuffix(n, "ids") || strings.HasSuffix(n, "sum") || strings.HasSuffix(n, "rev") || strings.HasSuffix(n, "tag")
}

// shannon is the Shannon entropy of s in bits per byte.
func shannon(s string) float64 {
	var counts [256]int
	for i := 0; i < len(s); i++ {
		counts[s[i]]++
	}
	h := 0.0
	n := float64(len(s))
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / n
			h -= p * math.Log2(p)
		}
	}
	return h
}

// highEntropy decides whether a literal body assigned to name (or to nothing, when name
// is "") looks like a credential, and returns its entropy.
func highEntropy(body, name string) (float64, bool) {
	cred := isCredentialName(name)
	n := len(body)
	if n < minCredentialLen || !cred && n < minAnonymousLen {
		return 0, false
	}
	if !base64ishRe.MatchString(body) || uuidRe.MatchString(body) || strings.HasPrefix(body, "/") || strings.Contains(body, "//") {
		return 0, false
	}
	if isDigestName(name) && !(cred && !strings.Contains(normName(name), "public")) {
		return 0, false
	}
	for _, p := range dataPrefixes {
		if strings.HasPrefix(body, p) {
			return 0, false
		}
	}
	// Alphabets ("abcdefghij…", "0123456789") and padding ("AAAAA") are not random.
	if runLength(body) >= 5 {
		return 0, false
	}
	hasDigit := strings.ContainsAny(body, "0123456789")
	hasLower := strings.ContainsAny(body, "abcdefghijklmnopqrstuvwxyz")
	hasUpper := strings.ContainsAny(body, "ABCDEFGHIJKLMNOPQRSTUVWXYZ")
	// Without a digit it is a word or an identifier (every random string of this length
	// has one); a '/' without all three classes is a path.
	if !hasDigit || !hasLower && !hasUpper || strings.Contains(body, "/") && !(hasLower && hasUpper) {
		return 0, false
	}
	if wordFraction(body) >= maxWordFraction || encodesPlainText(body) {
		return 0, false
	}
	h := shannon(body)
	if hexRe.MatchString(body) {
		// Hex is the format of digests, commit and object ids and test vectors; only a
		// name that says "key" or "credential" makes a hex literal suspect.
		return h, (cred || strings.Contains(normName(name), "key")) && n >= minHexLen && h >= hexThreshold
	}
	return h, h >= base64Threshold
}

// encodesPlainText reports whether s is base64 of plain text (JSON, XML, a message)
// that holds no credential: encoded data, not a key. A random key decodes to binary.
func encodesPlainText(s string) bool {
	var b []byte
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if d, err := enc.DecodeString(s); err == nil {
			b = d
			break
		}
	}
	if len(b) < 16 {
		return false
	}
	for _, c := range b {
		if (c < 0x20 || c > 0x7e) && c != '\n' && c != '\r' && c != '\t' {
			return false
		}
	}
	l := strings.ToLower(string(b))
	for _, m := range []string{"private", "secret", "password", "token", "key"} {
		if strings.Contains(l, m) {
			return false
		}
	}
	return true
}

// maxWordFraction is the share of a string's bytes in word-like letter runs from which
// it reads as identifiers or text. In random base64 such runs make up well under a
// third of the bytes (above 0.45 for about 1% of 32-byte tokens); in joined
// identifiers ("ConcatPermuteUint16x32", "TLS13-EarlyData-SkipEndOfEarlyData") and
// stringer tables they make up half or more.
const maxWordFraction = 0.45

// wordFraction is the share of s's bytes that are in word-like letter runs of four or
// more: "Word", "word" or "WORD" (an upper-case run followed by lower case gives its
// last capital to the next word, as in "HTTPServer").
func wordFraction(s string) float64 {
	upper := func(c byte) bool { return c >= 'A' && c <= 'Z' }
	lower := func(c byte) bool { return c >= 'a' && c <= 'z' }
	in := 0
	for i := 0; i < len(s); {
		c := s[i]
		if !upper(c) && !lower(c) {
			i++
			continue
		}
		j := i + 1
		if upper(c) && j < len(s) && upper(s[j]) {
			for j < len(s) && upper(s[j]) {
				j++
			}
			if j < len(s) && lower(s[j]) && j-i > 2 {
				j--
			}
		} else {
			for j < len(s) && lower(s[j]) {
				j++
			}
		}
		if j-i >= 4 {
			in += j - i
		}
		i = j
	}
	return float64(in) / float64(len(s))
}

// detectEntropy finds string literals that look like credentials by their randomness:
// base64-like literals of 20+ characters assigned to a credential-named variable or key,
// or of 32+ characters anywhere, with an entropy of at least 4.2 bits per character, and
// hex literals of 32+ characters whose name says they hold a key or a credential, with
// at least 3.0.
//
// Not flagged: UUIDs; digests, identifiers, public keys and examples by name (sha256,
// checksum, commitID, publicKey, example); text, paths, URLs and import paths (anything
// with a space, a dot or a leading '/'); joined identifiers (mostly word-like letter
// runs); alphabets and other sequences; base64 of plain text without credential words,
// embedded images and subresource-integrity hashes; lock and checksum files, minified
// JavaScript, tests and test data, documentation and API descriptions. Known gap:
// base64 of binary data that is not a secret (a small embedded file in an unknown
// format) cannot be told from a key and is flagged.
func detectEntropy(f File) []Finding {
	if skipEntropy(f.Path) {
		return nil
	}
	src := f.Content
	li := newLineIndex(src)
	var out []Finding
	for _, s := range entropyLiterals(f) {
		body := s.body(src)
		name, _ := assignedName(linePrefix(src, s.start))
		h, ok := highEntropy(body, name)
		if !ok {
			continue
		}
		where := ""
		if name != "" {
			where = fmt.Sprintf(" assigned to %q", name)
		}
		out = append(out, li.finding(s.bodyStart, "entropy/high-entropy-string", typev1.Severity_SEVERITY_ERROR,
			fmt.Sprintf("random-looking string %s%s (%d chars, %.1f bits/char) is probably a hard-coded credential; load it from the environment or a secret manager", mask(body), where, len(body), h)))
	}
	return out
}

// entropyLiterals returns the string literals of f, using the language's lexer when
// there is one (so comments and Go import paths are left out) and a line-based scanner
// otherwise. Interpolated literals are left out: their text is not a constant.
func entropyLiterals(f File) []strLit {
	switch Language(f.Path) {
	case "go":
		return goLiterals(f.Content)
	case "javascript", "typescript":
		return nonInterp(lexJS(f.Content).strs)
	case "python":
		return nonInterp(lexPy(f.Content).strs)
	}
	return scanLiterals(f.Content)
}

// nonInterp drops interpolated literals.
func nonInterp(ls []strLit) []strLit {
	out := ls[:0:0]
	for _, l := range ls {
		if !l.interp {
			out = append(out, l)
		}
	}
	return out
}

// goLiterals returns the string literals of Go source outside import declarations. It
// uses go/scanner, so it works on files that do not parse.
func goLiterals(src string) []strLit {
	fset := token.NewFileSet()
	file := fset.AddFile("", fset.Base(), len(src))
	var s scanner.Scanner
	s.Init(file, []byte(src), func(token.Position, string) {}, 0)
	var out []strLit
	inImport, importParen := false, false
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		switch {
		case tok == token.IMPORT:
			inImport = true
			continue
		case inImport && tok == token.LPAREN:
			importParen = true
			continue
		case inImport && tok == token.RPAREN:
			inImport, importParen = false, false
			continue
		case inImport && tok == token.SEMICOLON && !importParen:
			inImport = false
			continue
		}
		if tok != token.STRING || inImport || len(lit) < 2 {
			continue
		}
		off := file.Offset(pos)
		end := off + len(lit)
		if lit[0] == '`' {
			// The scanner drops carriage returns from raw strings: measure in the source.
			if i := strings.IndexByte(src[off+1:], '`'); i >= 0 {
				end = off + 1 + i + 1
			}
		}
		out = append(out, strLit{start: off, end: end, bodyStart: off + 1, bodyEnd: end - 1, quote: lit[0]})
	}
	return out
}
