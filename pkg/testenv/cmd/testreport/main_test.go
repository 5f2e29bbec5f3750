package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestReport(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"start","Package":"p"}`,
		`{"Action":"run","Package":"p","Test":"TestA"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"    a_test.go:1: chatter of a passing test\n"}`,
		`{"Action":"pass","Package":"p","Test":"TestA","Elapsed":1.5}`,
		`{"Action":"output","Package":"p","Test":"TestB","Output":"    b_test.go:5: progress it logged first\n"}`,
		`{"Action":"output","Package":"p","Test":"TestB","Output":"    b_test.go:9: the reason it failed\n","OutputType":"error"}`,
		`{"Action":"output","Package":"p","Test":"TestB","Output":"        its second line\n","OutputType":"error-continue"}`,
		`{"Action":"output","Package":"p","Test":"TestB","Output":"--- FAIL: TestB (3.00s)\n"}`,
		`{"Action":"fail","Package":"p","Test":"TestB","Elapsed":3}`,
		`{"Action":"output","Package":"p","Test":"TestB/sub","Output":"=== RUN   TestB/sub\n"}`,
		`{"Action":"pass","Package":"p","Test":"TestB/sub","Elapsed":9}`,
		`{"Action":"output","Package":"p","Test":"BenchmarkX","Output":"GetTask latency: 1 ms\n"}`,
		`{"Action":"output","Package":"p","Output":"FAIL\tp\t4.5s\n"}`,
		`{"Action":"fail","Package":"p","Elapsed":4.5}`,
		`# p [build failed]`,
		`{"Action":"run","Package":"q","Test":"TestPanics"}`,
		`{"Action":"output","Package":"q","Test":"TestPanics","Output":"panic: boom\n"}`,
	}, "\n")
	var out strings.Builder
	times, failures := Report(strings.NewReader(in), &out, false, nil)
	got := out.String()
	for _, want := range []string{"progress it logged first", "the reason it failed", "--- FAIL: TestB", "GetTask latency: 1 ms", "FAIL\tp\t4.5s", "# p [build failed]"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	for _, not := range []string{"chatter of a passing test", "=== RUN"} {
		if strings.Contains(got, not) {
			t.Errorf("%q shown:\n%s", not, got)
		}
	}
	var failed strings.Builder
	PrintFailures(&failed, failures)
	want := "2 failed:\n  FAIL p TestB (3.0s): b_test.go:9: the reason it failed\n  FAIL q TestPanics (did not finish): panic: boom\n"
	if failed.String() != want {
		t.Errorf("failures:\n%s\nwant:\n%s", failed.String(), want)
	}
	var slow strings.Builder
	PrintSlowest(&slow, times, 1)
	if !strings.Contains(slow.String(), "3.0s  p TestB") || strings.Contains(slow.String(), "TestA") || strings.Contains(slow.String(), "sub") {
		t.Errorf("slowest:\n%s", slow.String())
	}
}

// With -stream every test's output is printed as it arrives, a passing test's too, and once.
func TestReportStreams(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n","OutputType":"frame"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"    a_test.go:1: progress of a passing test\n"}`,
		`{"Action":"pass","Package":"p","Test":"TestA","Elapsed":1.5}`,
		`{"Action":"output","Package":"p","Test":"TestB","Output":"    b_test.go:9: the reason it failed\n","OutputType":"error"}`,
		`{"Action":"fail","Package":"p","Test":"TestB","Elapsed":3}`,
		`{"Action":"output","Package":"p","Test":"TestC","Output":"    c_test.go:2: still running when the binary died\n"}`,
	}, "\n")
	var out strings.Builder
	_, failures := Report(strings.NewReader(in), &out, true, nil)
	got := out.String()
	for _, want := range []string{"progress of a passing test", "the reason it failed", "still running when the binary died"} {
		if strings.Count(got, want) != 1 {
			t.Errorf("%q shown %d times, want once:\n%s", want, strings.Count(got, want), got)
		}
	}
	if strings.Contains(got, "=== RUN") {
		t.Errorf("=== lines shown:\n%s", got)
	}
	if len(failures) != 2 || failures[0].Reason != "b_test.go:9: the reason it failed" || failures[1].Reason != "c_test.go:2: still running when the binary died" {
		t.Errorf("failures %+v", failures)
	}
}

// The real go test -json (which, in Go 1.26, does not mark failure messages): the reason of
// a test that logs from a goroutine and from a helper before it fails, and logs in its
// clean-up after, is its Fatalf's line; a helper's failure is reported at its call; a
// panic is the panic.
func TestReasonFromTheRealToolchain(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"go.mod": "module fixture\n\ngo 1.22\n",
		"fixture_test.go": `package fixture

import "testing"

func TestFails(t *testing.T) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		t.Logf("progress from a goroutine")
	}()
	<-done
	step(t, "a helper's progress")
	t.Cleanup(func() { t.Logf("the clean-up's logs") })
	t.Fatalf("the reason it failed")
}

func step(t *testing.T, what string) {
	t.Helper()
	t.Log(what)
}

func TestHelperFails(t *testing.T) {
	t.Log("progress")
	must(t, false)
}

func must(t *testing.T, ok bool) {
	t.Helper()
	if !ok {
		t.Fatal("the helper's reason")
	}
}

func TestPanics(t *testing.T) {
	t.Log("progress")
	panic("boom")
}
`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "test", "-json", "-count=1", ".")
	cmd.Dir, cmd.Env = dir, append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	out, _ := cmd.Output() // the fixture fails
	_, failures := Report(strings.NewReader(string(out)), &strings.Builder{}, false, newSourceLines(dir))
	got := map[string]string{}
	for _, f := range failures {
		got[f.Test] = f.Reason
	}
	for test, want := range map[string]string{
		"TestFails":       "fixture_test.go:14: the reason it failed",
		"TestHelperFails": "fixture_test.go:24: the helper's reason",
		"TestPanics":      "panic: boom [recovered",
	} {
		if !strings.HasPrefix(got[test], want) {
			t.Errorf("%s: reason %q, want %q…\n%s", test, got[test], want, out)
		}
	}
}
