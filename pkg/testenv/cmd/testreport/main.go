// Command testreport runs `go test -json` with the arguments it is given and prints what
// plain `go test` would — each package's result line, and the output of failing tests (and
// of benchmarks, whose figures are the point of running them) — then the slowest tests of
// the run, so a slow suite says where its time goes. It exits with go test's status.
//
//	go run ./pkg/testenv/cmd/testreport -slowest 10 -- -count=1 ./pkg/...
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
	"slices"
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
}

// timing is one finished test.
type timing struct {
	Package, Test string
	Elapsed       time.Duration
}

func main() {
	slowest := flag.Int("slowest", 10, "how many of the slowest tests to list at the end")
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
	times := Report(stdout, os.Stdout)
	err = cmd.Wait()
	PrintSlowest(os.Stdout, times, *slowest)
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		os.Exit(exit.ExitCode())
	case err != nil:
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(2)
	}
}

// Report reads go test -json from in and writes what plain go test would to out; it
// returns the time of every test that finished (subtests included).
func Report(in io.Reader, out io.Writer) []timing {
	var times []timing
	held := map[string][]string{} // a running test's output, shown if it fails
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
			held[key] = append(held[key], e.Output)
		case e.Action == "pass" || e.Action == "skip":
			times = append(times, timing{e.Package, e.Test, seconds(e.Elapsed)})
			delete(held, key)
		case e.Action == "fail":
			times = append(times, timing{e.Package, e.Test, seconds(e.Elapsed)})
			for _, o := range held[key] {
				if !strings.HasPrefix(o, "=== ") {
					fmt.Fprint(out, o)
				}
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
		for _, o := range held[k] {
			if !strings.HasPrefix(o, "=== ") {
				fmt.Fprint(out, o)
			}
		}
	}
	return times
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
