package validate

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"

	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// ProjectDir locates a project directory (a Go module, a Node or Python project) twice: Rel
// is its directory relative to the workspace root ("." or "services/x"), Abs the same
// directory as the tools inside the sandbox see it (e.g. "/workspace/services/x"; empty
// when unknown). The go command prints paths relative
// to its working directory, and absolute ones with -fullpath or for files outside it; both
// become workspace-relative through Path.
type ProjectDir struct {
	Rel string
	Abs string
}

// Path turns a file name printed by a tool running in the module into a workspace-relative,
// '/'-separated path. A path outside the module's absolute directory (GOROOT, the module
// cache) is returned unchanged, so the reader still sees where it is.
func (m ProjectDir) Path(p string) string {
	p = strings.ReplaceAll(p, "\\", "/")
	if path.IsAbs(p) {
		if m.Abs == "" {
			return p
		}
		abs := path.Clean(m.Abs)
		if p == abs {
			return cleanRel(m.Rel)
		}
		rest, ok := strings.CutPrefix(p, strings.TrimSuffix(abs, "/")+"/")
		if !ok {
			return p
		}
		p = rest
	}
	return path.Join(cleanRel(m.Rel), p)
}

func cleanRel(rel string) string {
	if rel == "" {
		return "."
	}
	return path.Clean(rel)
}

// goPosLine matches the go command's and the compiler's "file.go:line[:col]: message", with
// the "vet: " prefix go vet puts on type errors.
var goPosLine = regexp.MustCompile(`^(?:vet: )?([^\s:][^:]*\.go):(\d+)(?::(\d+))?: (.*)$`)

// goMoreErrors is the compiler's and vet's note that it stopped counting.
var goMoreErrors = regexp.MustCompile(`^\(and \d+ more errors?\)$|^too many errors$`)

// ParseGoBuild parses the text output of go build, go vet (without -json), gofmt's syntax
// errors and go test's build output: "# pkg" headers are skipped, "file.go:3:2: msg" and
// "file.go:3: msg" become diagnostics, tab-indented lines continue the previous message
// (e.g. "have (int)\n\twant (int, int)"), and "too many errors" / "(and N more errors)"
// are dropped because they are not findings. tool names the tool in each diagnostic.
func ParseGoBuild(out []byte, tool string, mod ProjectDir) []*typev1.Diagnostic {
	var diags []*typev1.Diagnostic
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if strings.HasPrefix(line, "\t") && len(diags) > 0 {
			last := diags[len(diags)-1]
			last.Message += "\n" + strings.TrimSpace(line)
			continue
		}
		m := goPosLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		msg := strings.TrimSpace(m[4])
		if goMoreErrors.MatchString(msg) {
			continue
		}
		diags = append(diags, &typev1.Diagnostic{
			Path:     mod.Path(m[1]),
			Line:     atoi32(m[2]),
			Column:   atoi32(m[3]),
			Severity: typev1.Severity_SEVERITY_ERROR,
			Message:  msg,
			Tool:     tool,
		})
	}
	return dedupe(diags)
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
		diags = append(diags, ParseGoBuild(line, "go vet", mod)...)
		out = bytes.TrimLeft(rest, " \t\r\n")
	}
	return dedupe(diags)
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
					diags = append(diags, &typev1.Diagnostic{
						Severity: typev1.Severity_SEVERITY_ERROR,
						Message:  fmt.Sprintf("%s: %s", pkg, e.Error),
						Tool:     "go vet",
						Rule:     analyzer,
					})
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

// splitPosn splits "file.go:8:14" (file may be absolute) into its parts.
func splitPosn(posn string, mod ProjectDir) (string, int32, int32) {
	m := goPosLine.FindStringSubmatch(posn + ": x")
	if m == nil {
		return posn, 0, 0
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
