package main

import (
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
		`{"Action":"output","Package":"p","Test":"TestB","Output":"    b_test.go:9: the reason it failed\n"}`,
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
	times, failures := Report(strings.NewReader(in), &out)
	got := out.String()
	for _, want := range []string{"the reason it failed", "--- FAIL: TestB", "GetTask latency: 1 ms", "FAIL\tp\t4.5s", "# p [build failed]"} {
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
