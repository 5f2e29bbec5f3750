// Command testreport runs `go test -json` with the arguments it is given and prints what
// plain `go test` would — each package's result line, and the output of failing tests (and
// of benchmarks, whose figures are the point of running them) — then the slowest tests of
// the run, so a slow suite says where its time goes, and last the tests that failed, each
// with the line that says why, so the tail of a long run says what broke. It exits with go
// test's status.
//
//	go run ./pkg/testenv/cmd/testreport -slowest 10 -- -count=1 ./pkg/...
//
// When THEFOLD_TEST_FAILURES names a file, the failures are also appended to it, one per
// line: scripts/test.sh prints that file at the very end of a failed run, after the output
// of every shard and phase.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// event is one line of go test -json (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
	// OutputType is "error" for the first line of a t.Error or t.Fatal message and
	// "error-continue" for its further lines where go test marks them (Go 1.26 does not:
	// then reason looks at the source lines the messages name).
	OutputType string
}

// timing is one finished test.
type timing struct {
	Package, Test string
	Elapsed       time.Duration
}

// failure is a test that failed, or was still running when its package's binary ended (a
// panic or a timeout), with the first thing it logged that says why.
type failure struct {
	Package, Test string
	Elapsed       time.Duration // 0 when it never finished
	Reason        string
}

func (f failure) String() string {
	took := "did not finish"
	if f.Elapsed > 0 {
		took = fmt.Sprintf("%.1fs", f.Elapsed.Seconds())
	}
	s := fmt.Sprintf("FAIL %s %s (%s)", f.Package, f.Test, took)
	if f.Reason != "" {
		s += ": " + f.Reason
	}
	return s
}

func main() {
	slowest := flag.Int("slowest", 10, "how many of the slowest tests to list at the end")
	stream := flag.Bool("stream", false, "print every test's output as it arrives (as go test -v), not only a failed test's")
	flag.Parse()
	cmd := exec.Command("go", append([]string{"test", "-json"}, flag.Args()...)...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(2)
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(2)
	}
	times, failures := Report(stdout, os.Stdout, *stream, newSourceLines(""))
	err = cmd.Wait()
	PrintSlowest(os.Stdout, times, *slowest)
	PrintFailures(os.Stdout, failures)
	if path := os.Getenv("THEFOLD_TEST_FAILURES"); path != "" && len(failures) > 0 {
		if err := appendFailures(path, failures); err != nil {
			fmt.Fprintln(os.Stderr, "testreport:", err)
		}
	}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		os.Exit(exit.ExitCode())
	case err != nil:
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(2)
	}
}

// Report reads go test -json from in and writes what plain go test would to out (with
// stream, what go test -v would: every test's output as it arrives); it returns the time
// of every test that finished (subtests included) and the tests that failed or never
// finished.
func Report(in io.Reader, out io.Writer, stream bool, src Source) ([]timing, []failure) {
	var times []timing
	var failures []failure
	held := map[string][]event{} // a running test's output, shown if it fails
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if json.Unmarshal(line, &e) != nil || e.Action == "" {
			fmt.Fprintln(out, string(line)) // not test2json: build errors and the like
			continue
		}
		key := e.Package + " " + e.Test
		switch {
		case e.Test == "":
			// Package lines: "ok", "FAIL", "?", build failures, benchmark figures printed
			// outside a test. test2json repeats the verbose ones ("=== RUN") only per test.
			if e.Action == "output" && e.Output != "PASS\n" { // plain go test says only "ok"
				fmt.Fprint(out, e.Output)
			}
		case strings.HasPrefix(e.Test, "Benchmark"):
			if e.Action == "output" && !strings.HasPrefix(e.Output, "=== RUN") {
				fmt.Fprint(out, e.Output)
			}
		case e.Action == "output":
			held[key] = append(held[key], e)
			if stream && !strings.HasPrefix(e.Output, "=== ") {
				fmt.Fprint(out, e.Output)
			}
		case e.Action == "pass" || e.Action == "skip":
			times = append(times, timing{e.Package, e.Test, seconds(e.Elapsed)})
			delete(held, key)
		case e.Action == "fail":
			times = append(times, timing{e.Package, e.Test, seconds(e.Elapsed)})
			failures = append(failures, failure{e.Package, e.Test, seconds(e.Elapsed), reason(held[key], src)})
			if !stream {
				printHeld(out, held[key])
			}
			delete(held, key)
		}
	}
	// A test still running when the stream ended (a panic, a timeout) shows what it said.
	keys := make([]string, 0, len(held))
	for k := range held {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !stream {
			printHeld(out, held[k])
		}
		pkg, test, _ := strings.Cut(k, " ")
		failures = append(failures, failure{pkg, test, 0, reason(held[k], src)})
	}
	return times, failures
}

func printHeld(out io.Writer, held []event) {
	for _, e := range held {
		if !strings.HasPrefix(e.Output, "=== ") {
			fmt.Fprint(out, e.Output)
		}
	}
}

// Source returns line n of file in package pkg ("" when it cannot).
type Source func(pkg, file string, n int) string

// newSourceLines reads source lines of the packages go list finds from dir ("": here).
func newSourceLines(dir string) Source {
	dirs := map[string]string{}
	files := map[string][]string{}
	return func(pkg, file string, n int) string {
		d, ok := dirs[pkg]
		if !ok {
			cmd := exec.Command("go", "list", "-f", "{{.Dir}}", pkg)
			cmd.Dir = dir
			out, _ := cmd.Output()
			d = strings.TrimSpace(string(out))
			dirs[pkg] = d
		}
		if d == "" {
			return ""
		}
		path := filepath.Join(d, file)
		lines, ok := files[path]
		if !ok {
			b, _ := os.ReadFile(path)
			lines = strings.Split(string(b), "\n")
			files[path] = lines
		}
		if n < 1 || n > len(lines) {
			return ""
		}
		return lines[n-1]
	}
}

// location is a test's message line: "    name_test.go:12: message".
var location = regexp.MustCompile(`^\s+([\w.-]+\.go):(\d+): `)

// failCall and logCall are the calls that report a failure and that log, in a source line.
var (
	failCall = regexp.MustCompile(`\.(Fatal|Fatalf|Error|Errorf|Fail|FailNow|fail|failf|fatalf)\(`)
	logCall  = regexp.MustCompile(`\.(Log|Logf)\(`)
)

// reason is why a test failed: the first line of its first t.Error or t.Fatal, trimmed to
// one line of a terminal's width or so. Where go test marks those (OutputType "error"),
// that line; else the first message whose source line calls Fatal, Error or Fail (or a
// helper named fail), else the first whose source line does not log (a helper's, reported
// at its caller), else a panic, else the first line it logged (a test that logs its
// progress and never finished); "" when it logged nothing.
func reason(output []event, src Source) string {
	var first, notLog, panicked string
	trim := func(o string) string {
		if len(o) > 240 {
			return o[:240] + "…"
		}
		return o
	}
	for _, e := range output {
		o := strings.TrimSpace(e.Output)
		if o == "" || strings.HasPrefix(o, "=== ") || strings.HasPrefix(o, "--- ") {
			continue
		}
		if e.OutputType == "error" {
			return trim(o)
		}
		if first == "" {
			first = trim(o)
		}
		if panicked == "" && strings.HasPrefix(o, "panic: ") {
			panicked = trim(o)
		}
		m := location.FindStringSubmatch(e.Output)
		if m == nil || src == nil {
			continue
		}
		n, _ := strconv.Atoi(m[2])
		line := src(e.Package, m[1], n)
		switch {
		case failCall.MatchString(line):
			return trim(o)
		case notLog == "" && line != "" && !logCall.MatchString(line):
			notLog = trim(o)
		}
	}
	for _, r := range []string{notLog, panicked} {
		if r != "" {
			return r
		}
	}
	return first
}

// PrintFailures lists the tests that failed, parents after their subtests as go test ends
// them, with why.
func PrintFailures(out io.Writer, failures []failure) {
	if len(failures) == 0 {
		return
	}
	fmt.Fprintf(out, "%d failed:\n", len(failures))
	for _, f := range failures {
		fmt.Fprintf(out, "  %s\n", f)
	}
}

func appendFailures(path string, failures []failure) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	shard := ""
	if s := os.Getenv("THEFOLD_E2E_SHARD"); s != "" {
		shard = "[" + s + "] "
	}
	for _, fl := range failures {
		fmt.Fprintln(f, shard+fl.String())
	}
	return f.Close()
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// PrintSlowest lists the n slowest top-level tests (a parent's time includes its subtests).
func PrintSlowest(out io.Writer, times []timing, n int) {
	var top []timing
	for _, t := range times {
		if !strings.Contains(t.Test, "/") {
			top = append(top, t)
		}
	}
	if len(top) == 0 || n <= 0 {
		return
	}
	slices.SortStableFunc(top, func(a, b timing) int { return int(b.Elapsed - a.Elapsed) })
	fmt.Fprintf(out, "slowest %d tests:\n", min(n, len(top)))
	for _, t := range top[:min(n, len(top))] {
		fmt.Fprintf(out, "  %8.1fs  %s %s\n", t.Elapsed.Seconds(), t.Package, t.Test)
	}
}
