package validate

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// goMoreErrors is the compiler's and vet's note that it stopped counting.
var goMoreErrors = regexp.MustCompile(`^\(and \d+ more errors?\)$|^too many errors$`)

// ParseGoBuild parses the text output of go build, go vet (without -json), gofmt's syntax
// errors and go test's build output: "file:3:2: msg" and "file:3: msg" become diagnostics
// for any file the toolchain names (.go, Go assembly, cgo's C files and headers, go.mod),
// "vet: " prefixes are dropped, tab-indented lines continue the previous message (e.g.
// "have (int)\n\twant (int, int)"), and "too many errors" / "(and N more errors)" are
// dropped because they are not findings. A "# pkg" header says which package the lines
// after it are about: the C compiler cgo runs prints names relative to that package's
// directory. The C compiler's own severities (warning, note) are kept, and a line showing
// the sandbox lacks a program (no C compiler, no git) becomes an environment diagnostic
// (see RuleEnvironment) rather than an error of the code. tool names the tool in each
// diagnostic.
func ParseGoBuild(out []byte, tool string, mod ProjectDir) []*typev1.Diagnostic {
	p := goTextParser{tool: tool, mod: mod}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		p.line(sc.Text())
	}
	return dedupe(p.diags)
}

// goTextParser is ParseGoBuild's state between lines.
type goTextParser struct {
	tool   string
	mod    ProjectDir
	pkgDir string // the package of the last "# pkg" header, relative to the module
	diags  []*typev1.Diagnostic
	// cont is the diagnostic tab-indented lines continue; nil after a line that is not one.
	cont *typev1.Diagnostic
}

func (p *goTextParser) line(line string) {
	line = strings.TrimRight(line, "\r")
	if strings.HasPrefix(line, "\t") && p.cont != nil {
		p.cont.Message += "\n" + strings.TrimSpace(line)
		return
	}
	p.cont = nil
	if dir, ok := headerPkgDir(line, p.mod); ok {
		p.pkgDir = dir
		return
	}
	pos, ok := parsePosition(line)
	if !ok {
		if l, ok := envLackIn(line); ok {
			p.diags = append(p.diags, envDiagnostic(l, p.tool, ""))
		}
		return
	}
	if goMoreErrors.MatchString(pos.msg) {
		return
	}
	sev, msg := cSeverity(pos.msg)
	d := &typev1.Diagnostic{
		Path:     p.mod.pkgPath(pos.path, p.pkgDir),
		Line:     pos.line,
		Column:   pos.col,
		Severity: sev,
		Message:  msg,
		Tool:     p.tool,
	}
	if l, ok := envLackIn(pos.msg); ok {
		// e.g. "a.go:3:8: unable to resolve git version: … exec: "git": executable file
		// not found in $PATH": the import is fine, the sandbox has no git.
		e := envDiagnostic(l, p.tool, "")
		d.Severity, d.Message, d.Rule = e.Severity, l.message()+"\n"+msg, e.Rule
	}
	p.diags = append(p.diags, d)
	p.cont = d
}

// vetFinding is one entry of go vet -json: {"pkg": {"analyzer": [finding…] or {"error": …}}}.
type vetFinding struct {
	Posn    string `json:"posn"`
	Message string `json:"message"`
}

// ParseGoVetJSON parses go vet -json output, which mixes JSON objects (one per package,
// findings keyed by analyzer, which becomes the rule) with text: "# pkg" headers and the
// "vet: file.go:3:2: msg" type errors of packages that do not compile.
func ParseGoVetJSON(out []byte, mod ProjectDir) []*typev1.Diagnostic {
	var diags []*typev1.Diagnostic
	// The text lines are parsed in order by one parser, so a "# pkg" header still says
	// which package the lines after it (cgo's C errors among them) are about.
	text := goTextParser{tool: "go vet", mod: mod}
	for len(out) > 0 {
		if out[0] == '{' {
			dec := json.NewDecoder(bytes.NewReader(out))
			var pkgs map[string]map[string]json.RawMessage
			if err := dec.Decode(&pkgs); err == nil {
				diags = append(diags, vetObject(pkgs, mod)...)
				out = out[dec.InputOffset():]
				out = bytes.TrimLeft(out, " \t\r\n")
				continue
			}
		}
		line, rest, _ := bytes.Cut(out, []byte("\n"))
		text.line(string(line))
		out = bytes.TrimLeft(rest, " \r\n")
	}
	return dedupe(append(diags, text.diags...))
}

func vetObject(pkgs map[string]map[string]json.RawMessage, mod ProjectDir) []*typev1.Diagnostic {
	var diags []*typev1.Diagnostic
	for _, pkg := range sortedKeys(pkgs) {
		for _, analyzer := range sortedKeys(pkgs[pkg]) {
			raw := pkgs[pkg][analyzer]
			var findings []vetFinding
			if err := json.Unmarshal(raw, &findings); err != nil {
				// {"error": "..."}: the analyzer could not run on this package.
				var e struct {
					Error string `json:"error"`
				}
				if json.Unmarshal(raw, &e) == nil && e.Error != "" {
					d := &typev1.Diagnostic{
						Severity: typev1.Severity_SEVERITY_ERROR,
						Message:  fmt.Sprintf("%s: %s", pkg, e.Error),
						Tool:     "go vet",
						Rule:     analyzer,
					}
					asEnvironmental([]*typev1.Diagnostic{d}, envLacks(e.Error))
					diags = append(diags, d)
				}
				continue
			}
			for _, f := range findings {
				d := &typev1.Diagnostic{
					Severity: typev1.Severity_SEVERITY_ERROR,
					Message:  f.Message,
					Tool:     "go vet",
					Rule:     analyzer,
				}
				d.Path, d.Line, d.Column = splitPosn(f.Posn, mod)
				diags = append(diags, d)
			}
		}
	}
	return diags
}

// vetPosn is go vet -json's "posn": "file:line:col" (file may be absolute and hold spaces)
// or a bare file name.
var vetPosn = regexp.MustCompile(`^(.+?):(\d+)(?::(\d+))?$`)

// splitPosn splits "file.go:8:14" or "xxhash_amd64.s:189:1" (file may be absolute) into a
// workspace-relative path, line and column.
func splitPosn(posn string, mod ProjectDir) (string, int32, int32) {
	if posn == "" || posn == "-" {
		return "", 0, 0
	}
	m := vetPosn.FindStringSubmatch(posn)
	if m == nil {
		return mod.Path(posn), 0, 0
	}
	return mod.Path(m[1]), atoi32(m[2]), atoi32(m[3])
}

// ParseGofmtList turns gofmt -l's list of files into one WARNING each: the file is
// compilable but not formatted as gofmt would write it.
func ParseGofmtList(stdout []byte, mod ProjectDir) []*typev1.Diagnostic {
	var diags []*typev1.Diagnostic
	for _, line := range strings.Split(string(stdout), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		diags = append(diags, &typev1.Diagnostic{
			Path:     mod.Path(line),
			Severity: typev1.Severity_SEVERITY_WARNING,
			Message:  "not gofmt-formatted (run gofmt -w)",
			Tool:     "gofmt",
			Rule:     "gofmt",
		})
	}
	return diags
}

func atoi32(s string) int32 {
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil || n < 0 {
		return 0
	}
	return int32(n)
}

// dedupe drops repeated diagnostics: go build prints a package's errors once per build
// action that needs it, and the same type error reaches vet and build.
func dedupe(diags []*typev1.Diagnostic) []*typev1.Diagnostic {
	type key struct {
		path, msg, rule string
		line, col       int32
	}
	seen := make(map[key]bool, len(diags))
	out := diags[:0]
	for _, d := range diags {
		k := key{d.Path, d.Message, d.Rule, d.Line, d.Column}
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, d)
	}
	return out
}
