package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The load run: REST requests through the gateway at a fixed rate, open loop — a request
// starts when its time comes, however slow the answers are (a closed loop of clients would
// slow down with the server and hide it) — with a bound on the requests in flight: one that
// cannot start is dropped and counted as an error. Latency is a request's own, from when it
// was sent; how late the generator started requests (timer slack, a starved generator) is
// reported apart, so a generator that falls behind cannot pass for a slow server or hide one.

// loadConfig is a load run's shape.
type loadConfig struct {
	Rate        float64       // requests a second
	Duration    time.Duration // how long requests are started
	MaxInFlight int           // requests in flight at most
	Timeout     time.Duration // one request's limit
}

// loadConfigFromEnv is def with THEFOLD_LOAD_RPS, THEFOLD_LOAD_DURATION and
// THEFOLD_LOAD_MAX_IN_FLIGHT applied.
func loadConfigFromEnv(def loadConfig) (loadConfig, error) {
	c := def
	if v := os.Getenv("THEFOLD_LOAD_RPS"); v != "" {
		rps, err := strconv.ParseFloat(v, 64)
		if err != nil || rps <= 0 || rps > 100000 {
			return c, fmt.Errorf("THEFOLD_LOAD_RPS=%q: want a rate in requests a second, above 0", v)
		}
		c.Rate = rps
	}
	if v := os.Getenv("THEFOLD_LOAD_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return c, fmt.Errorf("THEFOLD_LOAD_DURATION=%q: want a positive duration such as 60s", v)
		}
		c.Duration = d
	}
	if v := os.Getenv("THEFOLD_LOAD_MAX_IN_FLIGHT"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return c, fmt.Errorf("THEFOLD_LOAD_MAX_IN_FLIGHT=%q: want a positive number", v)
		}
		c.MaxInFlight = n
	}
	return c, nil
}

// loadOp is one kind of request of the mix.
type loadOp struct {
	name   string
	weight int // out of loadMixTotal
	// request builds the request; n numbers it among all requests of the run.
	request func(n int64) (*http.Request, error)
	// done sees a successful answer's body (CreateTask adds the new task to the pool).
	done func(body []byte)
}

// loadMix is ~70% reads, ~30% writes.
func loadMix(l *loadTarget) []loadOp {
	return []loadOp{
		{name: "GetTask", weight: 40, request: func(int64) (*http.Request, error) {
			return l.request(http.MethodGet, "/v1/tasks/"+l.pick(), nil)
		}},
		{name: "ListTasks", weight: 30, request: func(int64) (*http.Request, error) {
			return l.request(http.MethodGet, "/v1/tasks?repo="+l.repo+"&page_size=20", nil)
		}},
		{name: "CreateTask", weight: 15, request: func(n int64) (*http.Request, error) {
			return l.request(http.MethodPost, "/v1/tasks", map[string]any{
				"title": fmt.Sprintf("load %d", n), "repo": l.repo, "labels": []string{"load"},
				"request_id": fmt.Sprintf("%s-%d", l.run, n),
			})
		}, done: l.remember},
		{name: "UpdateTask", weight: 15, request: func(n int64) (*http.Request, error) {
			return l.request(http.MethodPatch, "/v1/tasks/"+l.pick()+"?update_mask=title,description",
				map[string]any{"title": fmt.Sprintf("load %d (updated)", n), "description": "updated by the load run"})
		}},
	}
}

// loadTarget is what the requests work on: a repository of the run's own and the ids of
// its tasks.
type loadTarget struct {
	base, token, repo, run string

	mu  sync.Mutex
	ids []string
}

func (l *loadTarget) request(method, path string, body any) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, l.base+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+l.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

func (l *loadTarget) pick() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ids[rand.IntN(len(l.ids))]
}

func (l *loadTarget) remember(body []byte) {
	var out struct {
		Task struct {
			ID string `json:"id"`
		} `json:"task"`
	}
	if json.Unmarshal(body, &out) == nil && out.Task.ID != "" {
		l.mu.Lock()
		l.ids = append(l.ids, out.Task.ID)
		l.mu.Unlock()
	}
}

// loadReport is what a run measured.
type loadReport struct {
	cfg       loadConfig
	ops       []loadOp
	scheduled int           // requests that came due
	elapsed   time.Duration // from the first due time to the last answer
	latencies map[string][]time.Duration
	errors    map[string]int // by kind
	lag       []time.Duration
}

func (r *loadReport) errorCount() int {
	n := 0
	for _, c := range r.errors {
		n += c
	}
	return n
}

// runLoad seeds tasks, then runs cfg's load through the gateway.
func runLoad(tb testing.TB, cfg loadConfig) *loadReport {
	tb.Helper()
	run := fmt.Sprintf("load-%d", time.Now().UnixNano())
	target := &loadTarget{base: mesh.GatewayURL(), token: token, repo: "local/" + run, run: run}
	client := &http.Client{
		Timeout: cfg.Timeout,
		Transport: &http.Transport{
			// One idle connection per request that may be in flight: none is dialed twice.
			MaxIdleConns: cfg.MaxInFlight, MaxIdleConnsPerHost: cfg.MaxInFlight,
			DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		},
	}
	defer client.CloseIdleConnections()
	ops := loadMix(target)
	// Tasks for the reads and updates to work on, before the clock starts.
	for i := range 20 {
		req, err := target.request(http.MethodPost, "/v1/tasks", map[string]any{"title": fmt.Sprintf("seed %d", i), "repo": target.repo})
		if err != nil {
			tb.Fatal(err)
		}
		code, body, err := send(client, req)
		if err != nil || code != http.StatusOK {
			tb.Fatalf("seeding task %d: %d %s %v", i, code, body, err)
		}
		target.remember(body)
	}
	// The mix as a deck of 100 cards, shuffled once: exact proportions, no bursts of one kind.
	var deck []int
	for i, op := range ops {
		for range op.weight {
			deck = append(deck, i)
		}
	}
	rand.Shuffle(len(deck), func(i, j int) { deck[i], deck[j] = deck[j], deck[i] })

	rep := &loadReport{cfg: cfg, ops: ops, latencies: map[string][]time.Duration{}, errors: map[string]int{}}
	var mu sync.Mutex
	record := func(op string, lat time.Duration, errKind string) {
		mu.Lock()
		defer mu.Unlock()
		if errKind != "" {
			rep.errors[op+": "+errKind]++
			return
		}
		rep.latencies[op] = append(rep.latencies[op], lat)
	}

	interval := time.Duration(float64(time.Second) / cfg.Rate)
	slots := make(chan struct{}, cfg.MaxInFlight)
	var wg sync.WaitGroup
	start := time.Now()
	for n := int64(0); ; n++ {
		due := start.Add(time.Duration(n) * interval)
		if due.Sub(start) >= cfg.Duration {
			break
		}
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		rep.scheduled++
		rep.lag = append(rep.lag, time.Since(due))
		op := ops[deck[n%int64(len(deck))]]
		select {
		case slots <- struct{}{}:
		default:
			record(op.name, 0, fmt.Sprintf("dropped (%d requests in flight)", cfg.MaxInFlight))
			continue
		}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			req, err := op.request(n)
			if err != nil {
				record(op.name, 0, "building the request: "+err.Error())
				return
			}
			sent := time.Now()
			code, body, err := send(client, req)
			lat := time.Since(sent)
			switch {
			case err != nil:
				record(op.name, 0, transportError(err))
			case code != http.StatusOK:
				record(op.name, 0, httpError(code, body))
			default:
				if op.done != nil {
					op.done(body)
				}
				record(op.name, lat, "")
			}
		}()
	}
	wg.Wait()
	rep.elapsed = time.Since(start)
	return rep
}

// answered is the latencies of the requests answered 200.
func (r *loadReport) answered() []time.Duration {
	var all []time.Duration
	for _, l := range r.latencies {
		all = append(all, l...)
	}
	slices.Sort(all)
	return all
}

// achieved is the rate of requests answered 200.
func (r *loadReport) achieved() float64 {
	return float64(len(r.answered())) / r.elapsed.Seconds()
}

func (r *loadReport) percentile(p float64) time.Duration { return percentile(r.answered(), p) }

func send(client *http.Client, req *http.Request) (int, []byte, error) {
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// transportError names a failure without an HTTP answer by its kind, not its text (which
// carries ports and would make every one its own kind).
func transportError(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed"
	case strings.Contains(err.Error(), "connection refused"):
		return "connection refused"
	case strings.Contains(err.Error(), "connection reset"):
		return "connection reset"
	}
	return "transport: " + err.Error()
}

// httpError names an error answer by its status and the error shape's status name, e.g.
// "HTTP 429 RESOURCE_EXHAUSTED".
func httpError(code int, body []byte) string {
	var e struct {
		Status string `json:"status"`
	}
	_ = json.Unmarshal(body, &e)
	return strings.TrimSpace(fmt.Sprintf("HTTP %d %s", code, e.Status))
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func latencyLine(lat []time.Duration) string {
	s := slices.Clone(lat)
	slices.Sort(s)
	ms := func(d time.Duration) string {
		return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 1, 64) + " ms"
	}
	return fmt.Sprintf("p50 %s  p90 %s  p99 %s  max %s", ms(percentile(s, 0.50)), ms(percentile(s, 0.90)), ms(percentile(s, 0.99)), ms(percentile(s, 1)))
}

// print writes the report: the rate asked for and achieved, latency percentiles overall and
// by request kind, and errors by kind.
func (r *loadReport) print(w io.Writer) {
	all := r.answered()
	var mix []string
	for _, op := range r.ops {
		mix = append(mix, fmt.Sprintf("%d%% %s", op.weight, op.name))
	}
	fmt.Fprintf(w, "load: %g requests/s for %s over REST through the gateway, open loop, at most %d in flight (%s)\n",
		r.cfg.Rate, r.cfg.Duration, r.cfg.MaxInFlight, strings.Join(mix, ", "))
	fmt.Fprintf(w, "load: %d requests due, %d answered 200 in %s: %.1f requests/s achieved (%.1f/s asked), %d errors\n",
		r.scheduled, len(all), r.elapsed.Round(time.Millisecond), r.achieved(), r.cfg.Rate, r.errorCount())
	fmt.Fprintf(w, "load: latency of the answered requests: %s\n", latencyLine(all))
	for _, op := range r.ops {
		if l := r.latencies[op.name]; len(l) > 0 {
			fmt.Fprintf(w, "load:   %-10s %6d  %s\n", op.name, len(l), latencyLine(l))
		}
	}
	fmt.Fprintf(w, "load: generator lag (how late requests started): %s\n", latencyLine(r.lag))
	if len(r.errors) == 0 {
		fmt.Fprintln(w, "load: errors: none")
		return
	}
	kinds := make([]string, 0, len(r.errors))
	for k := range r.errors {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		fmt.Fprintf(w, "load: errors: %-60s %d\n", k, r.errors[k])
	}
}

// BenchmarkLoad is `make load`: 200 requests/s for 60 s by default (THEFOLD_LOAD_RPS,
// THEFOLD_LOAD_DURATION, THEFOLD_LOAD_MAX_IN_FLIGHT change it). It runs once whatever b.N
// is (run it with -benchtime 1x) and fails on any error.
func BenchmarkLoad(b *testing.B) {
	cfg, err := loadConfigFromEnv(loadConfig{Rate: 200, Duration: 60 * time.Second, MaxInFlight: 100, Timeout: 10 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	rep := runLoad(b, cfg)
	rep.print(os.Stdout)
	b.ReportMetric(0, "ns/op") // one run of cfg.Duration, not a time per operation
	b.ReportMetric(rep.achieved(), "req/s")
	b.ReportMetric(float64(rep.percentile(0.99).Microseconds())/1000, "p99-ms")
	if n := rep.errorCount(); n > 0 {
		b.Fatalf("%d requests failed", n)
	}
}

// TestLoadSmoke is a short load run in every e2e run: 50 requests/s for 3 s, no errors.
// Every one of its 150 requests may be in flight at once: a CI machine that the other
// shards load can stretch answers past a second, and the generator's cap on requests in
// flight (which `make load` keeps, counting a dropped request as an error) then dropped
// requests the gateway would have answered. A request still fails the test when it is
// answered with an error or not within its 10 s.
func TestLoadSmoke(t *testing.T) {
	alone(t)
	rep := runLoad(t, loadConfig{Rate: 50, Duration: 3 * time.Second, MaxInFlight: 150, Timeout: 10 * time.Second})
	var b strings.Builder
	rep.print(&b)
	t.Log("\n" + b.String())
	if n := rep.errorCount(); n > 0 {
		t.Fatalf("%d requests failed:\n%s", n, b.String())
	}
	if rep.scheduled != 150 {
		t.Errorf("%d requests due, want 150", rep.scheduled)
	}
}
