package validate

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"strings"

	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// testEvent is one line of go test -json (cmd/test2json), including the build events the go
// command adds since Go 1.24.
type testEvent struct {
	Action      string
	Package     string
	Test        string
	Output      string
	ImportPath  string
	FailedBuild string
}

var (
	// testLogLine is t.Error/t.Fatal/t.Log output: four spaces, file:line, message.
	testLogLine = regexp.MustCompile(`^    (\S+\.go):(\d+): (.*)$`)
	// stackFrame is a goroutine trace's "\t/path/file.go:26 +0x28" (or an assembly file's).
	stackFrame = regexp.MustCompile(`^\t(\S+\.\w+):(\d+)(?: \+0x[0-9a-f]+)?$`)
	// logPrefix is the standard logger's date and time, which log.Fatal in a TestMain puts
	// before the message.
	logPrefix = regexp.MustCompile(`^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d(?:\.\d+)? `)
)

// ParseGoTestJSON parses go test -json output (run with -fullpath so file names resolve) into
// one ERROR per failure: each "file.go:12: msg" a failing test logged (continuation lines
// joined), a panicking test at the first frame inside the module, a test that failed
// without saying where as a diagnostic without a path, and build errors of test binaries.
// The rule is the test's name. A failure whose output shows the sandbox lacks a program
// (a test that builds a plugin without a C compiler, say) is reported as the environment's
// (see RuleEnvironment), not as the code's.
func ParseGoTestJSON(out []byte, mod ProjectDir) []*typev1.Diagnostic {
	type testKey struct{ pkg, test string }
	var (
		diags      []*typev1.Diagnostic
		outputs    = map[testKey]*strings.Builder{}
		failed     []testKey
		failedPkgs []string
		buildOut   strings.Builder
	)
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] != '{' {
			// go test writes some build errors as plain text on stderr.
			buildOut.Write(line)
			buildOut.WriteByte('\n')
			continue
		}
		var ev testEvent
		if json.Unmarshal(line, &ev) != nil {
			continue
		}
		k := testKey{ev.Package, ev.Test}
		switch ev.Action {
		case "build-output":
			buildOut.WriteString(ev.Output)
		case "output":
			b := outputs[k]
			if b == nil {
				b = &strings.Builder{}
				outputs[k] = b
			}
			b.WriteString(ev.Output)
		case "fail":
			switch {
			case ev.Test != "":
				failed = append(failed, k)
			case ev.FailedBuild == "":
				failedPkgs = append(failedPkgs, ev.Package)
			}
		}
	}
	diags = append(diags, ParseGoBuild([]byte(buildOut.String()), "go test", mod)...)

	hasFailedChild := func(k testKey) bool {
		for _, f := range failed {
			if f.pkg == k.pkg && strings.HasPrefix(f.test, k.test+"/") {
				return true
			}
		}
		return false
	}
	pkgHasFailedTest := map[string]bool{}
	for _, k := range failed {
		pkgHasFailedTest[k.pkg] = true
		var text string
		if b := outputs[k]; b != nil {
			text = b.String()
		}
		found := testDiagnostics(text, k.test, mod)
		if len(found) == 0 && hasFailedChild(k) {
			continue // the subtest's own diagnostics say what went wrong
		}
		if len(found) == 0 {
			found = []*typev1.Diagnostic{{
				Severity: typev1.Severity_SEVERITY_ERROR,
				Message:  fmt.Sprintf("%s failed (package %s)", k.test, k.pkg),
				Tool:     "go test",
				Rule:     k.test,
			}}
		}
		asEnvironmental(found, envLacks(text))
		diags = append(diags, found...)
	}
	// A package that failed without a failing test: TestMain exited, init panicked, or the
	// binary timed out outside a test.
	for _, pkg := range failedPkgs {
		if pkgHasFailedTest[pkg] {
			continue
		}
		msg := "package " + pkg + " failed"
		var text string
		if b := outputs[testKey{pkg, ""}]; b != nil {
			text = b.String()
			if first := firstMeaningfulLine(text); first != "" {
				msg += ": " + first
			}
		}
		d := &typev1.Diagnostic{
			Severity: typev1.Severity_SEVERITY_ERROR,
			Message:  msg,
			Tool:     "go test",
		}
		// e.g. a TestMain that builds a plugin: "Error building plugin: exit status 1"
		// and, further down, the go command's "cgo is not enabled".
		asEnvironmental([]*typev1.Diagnostic{d}, envLacks(text))
		diags = append(diags, d)
	}
	return dedupe(diags)
}

// testDiagnostics finds the located messages in one failing test's output.
func testDiagnostics(text, test string, mod ProjectDir) []*typev1.Diagnostic {
	var diags []*typev1.Diagnostic
	var panicMsg string
	lines := strings.Split(text, "\n")
	for i, line := range lines {
		if m := testLogLine.FindStringSubmatch(line); m != nil {
			msg := m[3]
			// t.Errorf("a\nb") continues on lines indented by eight spaces.
			for j := i + 1; j < len(lines) && strings.HasPrefix(lines[j], "        "); j++ {
				msg += "\n" + strings.TrimSpace(lines[j])
			}
			diags = append(diags, &typev1.Diagnostic{
				Path:     mod.Path(m[1]),
				Line:     atoi32(m[2]),
				Severity: typev1.Severity_SEVERITY_ERROR,
				Message:  msg,
				Tool:     "go test",
				Rule:     test,
			})
			continue
		}
		if panicMsg == "" && strings.HasPrefix(line, "panic: ") {
			panicMsg = strings.TrimSpace(line)
			continue
		}
		if panicMsg != "" {
			// The first frame in the workspace is where the test went wrong; frames in
			// GOROOT or the module cache stay absolute and are passed over.
			if m := stackFrame.FindStringSubmatch(line); m != nil {
				if p := mod.Path(m[1]); !path.IsAbs(p) && !strings.HasPrefix(p, "../") {
					diags = append(diags, &typev1.Diagnostic{
						Path:     p,
						Line:     atoi32(m[2]),
						Severity: typev1.Severity_SEVERITY_ERROR,
						Message:  panicMsg,
						Tool:     "go test",
						Rule:     test,
					})
					panicMsg = "-" // reported
				}
			}
		}
	}
	if panicMsg != "" && panicMsg != "-" {
		diags = append(diags, &typev1.Diagnostic{
			Severity: typev1.Severity_SEVERITY_ERROR,
			Message:  panicMsg,
			Tool:     "go test",
			Rule:     test,
		})
	}
	return diags
}

func firstMeaningfulLine(text string) string {
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "FAIL") || strings.HasPrefix(line, "ok ") ||
			strings.HasPrefix(line, "=== ") || strings.HasPrefix(line, "--- ") {
			continue
		}
		return logPrefix.ReplaceAllString(line, "")
	}
	return ""
}
