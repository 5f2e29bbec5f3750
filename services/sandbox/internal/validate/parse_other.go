package validate

import (
	"bufio"
	"bytes"
	"encoding/json"
	"regexp"
	"strings"

	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

var (
	// tscLine is tsc --pretty false: "src/a.ts(3,5): error TS2322: Type …".
	tscLine = regexp.MustCompile(`^(.+?)\((\d+),(\d+)\): (error|warning|message) (TS\d+): (.*)$`)
	// tscGlobal is an error tied to no file: "error TS5058: The specified path …".
	tscGlobal = regexp.MustCompile(`^(error|warning|message) (TS\d+): (.*)$`)
)

// ParseTSC parses tsc output written with --pretty false. Lines indented under a
// diagnostic (the chain of "Type 'x' is not assignable…" reasons) continue its message.
func ParseTSC(out []byte, dir ProjectDir) []*typev1.Diagnostic {
	var diags []*typev1.Diagnostic
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if strings.HasPrefix(line, "  ") && len(diags) > 0 {
			diags[len(diags)-1].Message += "\n" + strings.TrimSpace(line)
			continue
		}
		if m := tscLine.FindStringSubmatch(line); m != nil {
			diags = append(diags, &typev1.Diagnostic{
				Path:     dir.Path(m[1]),
				Line:     atoi32(m[2]),
				Column:   atoi32(m[3]),
				Severity: tscSeverity(m[4]),
				Message:  m[6],
				Tool:     "tsc",
				Rule:     m[5],
			})
			continue
		}
		if m := tscGlobal.FindStringSubmatch(line); m != nil {
			diags = append(diags, &typev1.Diagnostic{
				Severity: tscSeverity(m[1]),
				Message:  m[3],
				Tool:     "tsc",
				Rule:     m[2],
			})
		}
	}
	return diags
}

func tscSeverity(s string) typev1.Severity {
	switch s {
	case "error":
		return typev1.Severity_SEVERITY_ERROR
	case "warning":
		return typev1.Severity_SEVERITY_WARNING
	}
	return typev1.Severity_SEVERITY_INFO
}

// eslintFile is one element of eslint --format json: a file and its messages.
type eslintFile struct {
	FilePath string `json:"filePath"`
	Messages []struct {
		RuleID   *string `json:"ruleId"`
		Severity int     `json:"severity"`
		Message  string  `json:"message"`
		Line     int32   `json:"line"`
		Column   int32   `json:"column"`
		Fatal    bool    `json:"fatal"`
	} `json:"messages"`
}

// ParseESLintJSON parses eslint --format json (an array of files with their messages;
// severity 2 is an error, 1 a warning; a fatal message is a parse error). Anything
// printed before the array (npx notices) is skipped. It reports whether the output held
// the array at all, so a caller can tell "no findings" from "eslint printed something
// else".
func ParseESLintJSON(out []byte, dir ProjectDir) ([]*typev1.Diagnostic, bool) {
	var files []eslintFile
	found := false
	// The report is the first '[' that starts a decodable array; a notice before it may
	// hold brackets of its own.
	for off := 0; off < len(out); {
		i := bytes.IndexByte(out[off:], '[')
		if i < 0 {
			break
		}
		if json.NewDecoder(bytes.NewReader(out[off+i:])).Decode(&files) == nil {
			found = true
			break
		}
		off += i + 1
	}
	if !found {
		return nil, false
	}
	var diags []*typev1.Diagnostic
	for _, f := range files {
		for _, m := range f.Messages {
			d := &typev1.Diagnostic{
				Path:     dir.Path(f.FilePath),
				Line:     m.Line,
				Column:   m.Column,
				Severity: typev1.Severity_SEVERITY_WARNING,
				Message:  m.Message,
				Tool:     "eslint",
			}
			if m.Severity >= 2 || m.Fatal {
				d.Severity = typev1.Severity_SEVERITY_ERROR
			}
			if m.RuleID != nil {
				d.Rule = *m.RuleID
			}
			diags = append(diags, d)
		}
	}
	return diags, true
}

var (
	// pyFileLine starts a traceback entry or a syntax error: `  File "x.py", line 3`.
	pyFileLine = regexp.MustCompile(`^\s*File "([^"]+)", line (\d+)`)
	// pyErrorLine ends a syntax error report: "SyntaxError: invalid syntax".
	pyErrorLine = regexp.MustCompile(`^(SyntaxError|IndentationError|TabError|ValueError): (.*)$`)
	// pytestLine is pytest --tb=line: "/abs/tests/test_x.py:12: AssertionError: msg".
	pytestLine = regexp.MustCompile(`^([^\s:][^:]*\.py):(\d+): (.*)$`)
	// pytestSummary is the short test summary: "FAILED tests/test_x.py::test_a - msg".
	pytestSummary = regexp.MustCompile(`^(FAILED|ERROR) ([^\s:]+\.py)(?:::(\S+))?(?: - (.*))?$`)
)

// ParsePython parses the syntax errors printed by py_compile (and compile() through
// traceback.format_exception_only: `File "x.py", line 3` … `SyntaxError: msg`) and pytest's
// --tb=line failures ("x.py:12: AssertionError: msg") and short summary ("FAILED
// x.py::test_a - msg"). A summary line adds a diagnostic only for a file that has no
// located one, so a failure is not reported twice.
func ParsePython(out []byte, dir ProjectDir) []*typev1.Diagnostic {
	var (
		diags   []*typev1.Diagnostic
		summary []*typev1.Diagnostic
		pending *typev1.Diagnostic // a File "…", line N waiting for its error line
	)
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if m := pyFileLine.FindStringSubmatch(line); m != nil {
			pending = &typev1.Diagnostic{Path: dir.Path(m[1]), Line: atoi32(m[2])}
			continue
		}
		if m := pyErrorLine.FindStringSubmatch(line); m != nil && pending != nil {
			pending.Severity = typev1.Severity_SEVERITY_ERROR
			pending.Message = m[1] + ": " + m[2]
			pending.Tool = "python3"
			pending.Rule = m[1]
			diags = append(diags, pending)
			pending = nil
			continue
		}
		if m := pytestSummary.FindStringSubmatch(line); m != nil {
			msg := m[4]
			if msg == "" {
				msg = strings.ToLower(m[1])
			}
			summary = append(summary, &typev1.Diagnostic{
				Path:     dir.Path(m[2]),
				Severity: typev1.Severity_SEVERITY_ERROR,
				Message:  msg,
				Tool:     "pytest",
				Rule:     m[3],
			})
			continue
		}
		if m := pytestLine.FindStringSubmatch(line); m != nil {
			diags = append(diags, &typev1.Diagnostic{
				Path:     dir.Path(m[1]),
				Line:     atoi32(m[2]),
				Severity: typev1.Severity_SEVERITY_ERROR,
				Message:  m[3],
				Tool:     "pytest",
			})
		}
	}
	located := map[string]bool{}
	for _, d := range diags {
		located[d.Path] = true
	}
	for _, d := range summary {
		if !located[d.Path] {
			diags = append(diags, d)
		}
	}
	return dedupe(diags)
}
