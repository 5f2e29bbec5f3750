package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
)

// benchClients is how many clients a parallel run uses: b.RunParallel starts parallelism
// times GOMAXPROCS goroutines.
func benchClients(parallelism int) int { return parallelism * runtime.GOMAXPROCS(0) }

// BenchmarkGetTask measures GetTask directly over gRPC against the tasks service, over REST
// through the gateway (which adds an HTTP hop, JSON transcoding and a second gRPC hop), and
// over REST through bareproxy twice: hand-written, the least a REST→gRPC proxy in its own
// process can do (the floor the gateway is held against), and through grpc-gateway's
// generated handler with nothing else (the least an edge built on grpc-gateway can do) —
// sequentially (latency) and with parallel clients (throughput), and prints the ratios.
//
// To compare like with like on a shared machine, whose speed drifts from second to second:
// the paths take turns in short blocks of calls, so each sees the same machine; all are
// warmed up with as many clients as the parallel runs use (no connection is dialed while
// timed: the REST clients keep one idle connection per client, the gRPC client multiplexes
// one); and the REST client reads every body to the end, so its connections are reused.
func BenchmarkGetTask(b *testing.B) {
	const parallelism = 8
	ctx := authed(context.Background())
	client := tasksv1.NewTaskServiceClient(dial(b, "tasks"))
	created, err := client.CreateTask(ctx, &tasksv1.CreateTaskRequest{Title: "bench", Repo: "local/bench"})
	if err != nil {
		b.Fatal(err)
	}
	id := created.GetTask().GetId()
	httpClient := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	b.Cleanup(httpClient.CloseIdleConnections)

	getREST := func(base string) func() error {
		url := base + "/v1/tasks/" + id
		return func() error {
			req, err := http.NewRequest(http.MethodGet, url, nil)
			if err != nil {
				return err
			}
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := httpClient.Do(req)
			if err != nil {
				return err
			}
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("status %d", resp.StatusCode)
			}
			return err
		}
	}
	paths := []benchPath{
		{"grpc", func() error {
			_, err := client.GetTask(ctx, &tasksv1.GetTaskRequest{Id: id})
			return err
		}},
		{"rest", getREST(mesh.GatewayURL())},
		{"bare", getREST(startBareProxy(b))},
		{"grpc-gateway", getREST(startBareProxy(b, "-grpc-gateway"))},
	}
	for _, p := range paths {
		// As many clients as the parallel run: the connections it needs exist before it is timed.
		if err := concurrently(p.call, benchClients(parallelism), 20*benchClients(parallelism)); err != nil {
			b.Fatalf("warming up %s: %v", p.name, err)
		}
	}

	latency := map[string]time.Duration{}
	throughput := map[string]float64{}
	var seqRounds, parRounds map[string][]time.Duration
	b.Run("sequential", func(b *testing.B) {
		spent, rounds, err := takeTurnsByRound(paths, b.N, 100, func(call func() error, n int) error {
			for range n {
				if err := call(); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		seqRounds = rounds
		for _, p := range paths {
			latency[p.name] = spent[p.name] / time.Duration(b.N)
			b.ReportMetric(float64(latency[p.name].Microseconds()), p.name+"-µs/call")
		}
	})
	b.Run("parallel", func(b *testing.B) {
		clients := benchClients(parallelism)
		spent, rounds, err := takeTurnsByRound(paths, b.N, 500, func(call func() error, n int) error {
			return concurrently(call, clients, n)
		})
		if err != nil {
			b.Fatal(err)
		}
		parRounds = rounds
		for _, p := range paths {
			throughput[p.name] = float64(b.N) / spent[p.name].Seconds()
			b.ReportMetric(throughput[p.name], p.name+"-calls/s")
		}
	})
	if len(latency) == len(paths) && len(throughput) == len(paths) {
		fmt.Printf("GetTask latency:    gRPC %v, REST via gateway %v (REST/gRPC = %.2fx); floor, a bare REST proxy: %v (%.2fx)\n",
			latency["grpc"], latency["rest"], float64(latency["rest"])/float64(latency["grpc"]),
			latency["bare"], float64(latency["bare"])/float64(latency["grpc"]))
		fmt.Printf("GetTask throughput: gRPC %.0f calls/s, REST via gateway %.0f calls/s (gRPC/REST = %.2fx); floor, a bare REST proxy: %.0f calls/s (%.2fx)\n",
			throughput["grpc"], throughput["rest"], throughput["grpc"]/throughput["rest"],
			throughput["bare"], throughput["grpc"]/throughput["bare"])
		fmt.Printf("GetTask REST against the floors: gateway latency %.2fx the bare proxy's, %.2fx grpc-gateway alone's (which is %.2fx the bare proxy's); gateway throughput %.2f of the bare proxy's, %.2f of grpc-gateway alone's (which is %.2f of the bare proxy's)\n",
			float64(latency["rest"])/float64(latency["bare"]), float64(latency["rest"])/float64(latency["grpc-gateway"]),
			float64(latency["grpc-gateway"])/float64(latency["bare"]),
			throughput["rest"]/throughput["bare"], throughput["rest"]/throughput["grpc-gateway"], throughput["grpc-gateway"]/throughput["bare"])
		// The same, as the median over rounds of the ratio within each round (a round is one
		// block of each path, back to back): a burst of other work on the machine tilts the
		// totals above toward whichever path it hit, and the median of rounds far less.
		fmt.Printf("GetTask REST against the floors, median of %d rounds: gateway latency %.2fx the bare proxy's, %.2fx grpc-gateway alone's (which is %.2fx the bare proxy's); gateway throughput %.2f of the bare proxy's, %.2f of grpc-gateway alone's (which is %.2f of the bare proxy's)\n",
			len(seqRounds["rest"]),
			medianRatio(seqRounds["rest"], seqRounds["bare"]), medianRatio(seqRounds["rest"], seqRounds["grpc-gateway"]), medianRatio(seqRounds["grpc-gateway"], seqRounds["bare"]),
			medianRatio(parRounds["bare"], parRounds["rest"]), medianRatio(parRounds["grpc-gateway"], parRounds["rest"]), medianRatio(parRounds["bare"], parRounds["grpc-gateway"]))
	}
}

// A benchPath is one way to make the benchmarked call.
type benchPath struct {
	name string
	call func() error
}

// takeTurns makes n calls of every path with run, in blocks of at most block calls, the
// paths taking turns block by block, and returns the time each path's calls took.
func takeTurns(paths []benchPath, n, block int, run func(call func() error, n int) error) (map[string]time.Duration, error) {
	spent, _, err := takeTurnsByRound(paths, n, block, run)
	return spent, err
}

// takeTurnsByRound is takeTurns that also returns each path's time in every round (one
// block of each path), for ratios that a burst of load on the machine during one path's
// block cannot tilt: see medianRatio.
func takeTurnsByRound(paths []benchPath, n, block int, run func(call func() error, n int) error) (map[string]time.Duration, map[string][]time.Duration, error) {
	spent := map[string]time.Duration{}
	rounds := map[string][]time.Duration{}
	for done := 0; done < n; done += block {
		k := min(block, n-done)
		for _, p := range paths {
			start := time.Now()
			if err := run(p.call, k); err != nil {
				return nil, nil, fmt.Errorf("%s: %w", p.name, err)
			}
			d := time.Since(start)
			spent[p.name] += d
			rounds[p.name] = append(rounds[p.name], d)
		}
	}
	return spent, rounds, nil
}

// medianRatio is the median over rounds of a's time over b's in the same round.
func medianRatio(a, b []time.Duration) float64 {
	var r []float64
	for i := range min(len(a), len(b)) {
		if b[i] > 0 {
			r = append(r, float64(a[i])/float64(b[i]))
		}
	}
	if len(r) == 0 {
		return 0
	}
	slices.Sort(r)
	return r[len(r)/2]
}

// concurrently makes n calls from clients goroutines, which take the next call as they
// finish one, and returns the first error.
func concurrently(call func() error, clients, n int) error {
	var next atomic.Int64
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				if err := call(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// startBareProxy builds and starts bareproxy (with args) in front of the mesh's tasks
// service and returns its base URL; it is stopped when b ends.
func startBareProxy(b *testing.B, args ...string) string {
	b.Helper()
	exe := filepath.Join(b.TempDir(), "bareproxy")
	build := exec.Command("go", "build", "-o", exe, "./bareproxy")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("building bareproxy: %v\n%s", err, out)
	}
	cmd := exec.Command(exe, append([]string{"-tasks", mesh.GRPCAddr("tasks")}, args...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		b.Fatalf("bareproxy did not start: %v", err)
	}
	return "http://" + strings.TrimSpace(addr)
}
