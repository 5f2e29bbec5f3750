package validate

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// RuleEnvironment is the rule of a diagnostic that reports a limitation of the sandbox, not
// a problem in the code: a toolchain could not run a program the environment lacks (no C
// compiler for cgo, no git for the go command, no pytest). Such a diagnostic is a WARNING,
// so nothing reads it as the code's error (Severity ERROR means "wrong" and marks a file
// failed), and its message starts with "environment: ". A step whose every finding is
// environmental is STEP_STATUS_ERROR ("the tool could not run"), never FAILED, and never
// PASSED either: the check did not happen, so the response's passed stays false.
const RuleEnvironment = "environment"

// envLack is something the sandbox lacks, as a tool's output showed it.
type envLack struct {
	what string // "gcc"
	why  string // "cgo needs a C compiler"
	line string // the output line that showed it
}

// message is the plain statement of the limitation.
func (l envLack) message() string {
	return fmt.Sprintf("environment: the sandbox lacks %s (%s); this is not an error in the code", l.what, l.why)
}

// envPattern recognises one way a tool says a program or library is missing.
type envPattern struct {
	re *regexp.Regexp
	// lack builds the finding from the submatches.
	lack func(m []string) (what, why string)
}

var (
	// libcHeaders are headers every C toolchain ships (libc6-dev and the compiler's own):
	// one missing means an incomplete toolchain, while a missing header of the project or
	// of some library is left to the code.
	libcHeaders = []string{"stdlib.h", "stdio.h", "string.h", "stddef.h", "stdint.h", "stdarg.h",
		"stdbool.h", "errno.h", "unistd.h", "dlfcn.h", "pthread.h", "limits.h", "signal.h",
		"sys/types.h", "features.h", "math.h", "time.h", "fcntl.h"}

	envPatterns = []envPattern{
		{regexp.MustCompile(`cgo: C compiler "([^"]+)" not found`), func(m []string) (string, string) {
			return path.Base(m[1]), "cgo needs a C compiler"
		}},
		{regexp.MustCompile(`requires external \(cgo\) linking, but cgo is not enabled`), func([]string) (string, string) {
			return "a C compiler", "without one the go command turns cgo off, and this build needs cgo"
		}},
		{regexp.MustCompile(`go: missing (\w+) command`), func(m []string) (string, string) {
			return strings.ToLower(m[1]), "the go command runs it to fetch modules"
		}},
		{regexp.MustCompile(`exec: "([^"]+)": executable file not found`), func(m []string) (string, string) {
			return path.Base(m[1]), programWhy(path.Base(m[1]))
		}},
		{regexp.MustCompile(`collect2: fatal error: cannot find '([^']+)'`), func(m []string) (string, string) {
			return m[1], "the C compiler links with it"
		}},
		{regexp.MustCompile(`error trying to exec '([^']+)'`), func(m []string) (string, string) {
			return m[1], "the C compiler is installed without it"
		}},
		{regexp.MustCompile(`\bld(?:\.\w+)?: cannot find (crt1\.o|crti\.o|-lc\b)`), func(m []string) (string, string) {
			return "the C library's development files (libc6-dev)", "the linker cannot find " + m[1]
		}},
		{regexp.MustCompile(`\bld(?:\.\w+)?: cannot find -l([\w+.-]+)`), func(m []string) (string, string) {
			return "the C library lib" + m[1], "the linker cannot find -l" + m[1]
		}},
		{regexp.MustCompile(`fatal error: (` + strings.Join(quoteAll(libcHeaders), "|") + `): No such file or directory`), func(m []string) (string, string) {
			return "the C standard headers (libc6-dev)", "the C compiler cannot find " + m[1]
		}},
		{regexp.MustCompile(`Package ([\w+.-]+) was not found in the pkg-config search path`), func(m []string) (string, string) {
			return "the development files of " + m[1], "pkg-config cannot find them for cgo"
		}},
		{regexp.MustCompile(`No module named '?pytest'?`), func([]string) (string, string) {
			return "pytest", "the Python tests run with it"
		}},
		{regexp.MustCompile(`Cannot find module '(typescript|eslint|jest|mocha|vitest|ts-node|tsx)'`), func(m []string) (string, string) {
			return m[1], "the project's tools are not installed in node_modules"
		}},
		// "command not found": bash ("bash: x: command not found") and the local and bwrap
		// backends ("x: command not found in PATH /usr/bin:/bin").
		{regexp.MustCompile(`(?:^|: )([\w.+-]+): command not found`), func(m []string) (string, string) {
			return m[1], programWhy(m[1])
		}},
		// A shell's "not found", as dash ("sh: 1: x: not found"), bash ("sandbox: line 1:
		// exec: x: not found") and busybox ("sandbox: exec: line 0: x: not found") say it;
		// the docker backend execs the command from a shell named "sandbox".
		{regexp.MustCompile(`^(?:/bin/|/usr/bin/)?(?:sh|bash|dash|ash|busybox|sandbox): (?:(?:\d+|line \d+|exec): )*([\w.+-]+): not found$`), func(m []string) (string, string) {
			return m[1], programWhy(m[1])
		}},
		{regexp.MustCompile(`^(?:/usr/bin/)?env: '?([\w.+-]+)'?: No such file or directory$`), func(m []string) (string, string) {
			return m[1], programWhy(m[1])
		}},
	}
)

func quoteAll(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = regexp.QuoteMeta(v)
	}
	return out
}

// programWhy says what a missing program is for.
func programWhy(prog string) string {
	switch prog {
	case "gcc", "cc", "clang", "tcc":
		return "cgo needs a C compiler"
	case "g++", "c++", "clang++":
		return "cgo needs a C++ compiler for C++ files"
	case "ld", "ld.gold", "ld.bfd", "ld.lld", "as":
		return "the C compiler needs it to link and assemble"
	case "pkg-config":
		return "cgo runs it for #cgo pkg-config directives"
	case "git", "hg", "svn", "bzr", "fossil":
		return "the go command runs it to fetch modules"
	case "tsc":
		return "the TypeScript compiler; typescript is not installed"
	case "node", "npm", "npx":
		return "the Node.js toolchain"
	case "python3", "python", "pytest":
		return "the Python toolchain"
	case "go", "gofmt":
		return "the Go toolchain"
	}
	return "a program the build or the tests run"
}

// envLacks returns what text shows the sandbox lacks, each thing once, in order.
func envLacks(text string) []envLack {
	var lacks []envLack
	for _, line := range strings.Split(text, "\n") {
		if l, ok := envLackIn(line); ok && !slices.ContainsFunc(lacks, func(x envLack) bool { return x.what == l.what }) {
			lacks = append(lacks, l)
		}
	}
	return lacks
}

// envLackIn reports whether one output line shows the sandbox lacks something.
func envLackIn(line string) (envLack, bool) {
	line = strings.TrimSpace(strings.TrimRight(line, "\r"))
	if line == "" {
		return envLack{}, false
	}
	for _, p := range envPatterns {
		if m := p.re.FindStringSubmatch(line); m != nil {
			what, why := p.lack(m)
			return envLack{what: what, why: why, line: line}, true
		}
	}
	return envLack{}, false
}

// envDiagnostic reports l as a diagnostic of tool; context (the failure it explains) goes
// into the message after the statement and before the line that showed it.
func envDiagnostic(l envLack, tool, context string) *typev1.Diagnostic {
	msg := l.message()
	if context != "" {
		msg += "\n" + context
	}
	if !strings.Contains(context, l.line) {
		msg += "\n" + l.line
	}
	return &typev1.Diagnostic{
		Severity: typev1.Severity_SEVERITY_WARNING,
		Message:  msg,
		Tool:     tool,
		Rule:     RuleEnvironment,
	}
}

// asEnvironmental turns diagnostics a failure produced into the environment's: the output
// that holds them also shows the sandbox lacks something (lacks), so the failure is that
// limitation's, not the code's. Position and tool stay; the old rule (a test's name) and
// message follow the statement.
func asEnvironmental(diags []*typev1.Diagnostic, lacks []envLack) {
	if len(lacks) == 0 {
		return
	}
	l := lacks[0]
	for _, d := range diags {
		if d.Rule == RuleEnvironment {
			continue
		}
		context := d.Message
		if d.Rule != "" {
			context = d.Rule + ": " + context
		}
		e := envDiagnostic(l, d.Tool, context)
		d.Severity, d.Message, d.Rule = e.Severity, e.Message, e.Rule
	}
}

// isEnvironmental reports whether d is a limitation of the sandbox.
func isEnvironmental(d *typev1.Diagnostic) bool { return d.Rule == RuleEnvironment }

// envSummary states the limitations diags report, for a step's message; "" when none.
func envSummary(diags []*typev1.Diagnostic) string {
	var parts []string
	for _, d := range diags {
		if !isEnvironmental(d) {
			continue
		}
		first, _, _ := strings.Cut(d.Message, "\n")
		first = strings.TrimSuffix(strings.TrimPrefix(first, "environment: the sandbox lacks "), "; this is not an error in the code")
		if !slices.Contains(parts, first) {
			parts = append(parts, first)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "environment: the sandbox lacks " + strings.Join(parts, ", ") + "; this is not an error in the code"
}
