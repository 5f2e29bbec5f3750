package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"sync"
	"testing"
	"time"

	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
)

// benchClients is how many clients a parallel run uses: b.RunParallel starts parallelism
// times GOMAXPROCS goroutines.
func benchClients(parallelism int) int { return parallelism * runtime.GOMAXPROCS(0) }

// BenchmarkGetTask measures GetTask directly over gRPC against the tasks service and over
// REST through the gateway (which adds JSON transcoding and a second gRPC hop), sequentially
// (latency) and with parallel clients (throughput), and prints the REST/gRPC ratios.
//
// To compare like with like on a shared machine: both paths are warmed up with as many
// clients as the parallel runs use (no connection is dialed while timed: the REST client
// keeps one idle connection per client, the gRPC client multiplexes one), the two runs of a
// kind follow each other, and the REST client reads every body to the end, so its
// connections are reused.
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
	url := mesh.GatewayURL() + "/v1/tasks/" + id

	getGRPC := func() error {
		_, err := client.GetTask(ctx, &tasksv1.GetTaskRequest{Id: id})
		return err
	}
	getREST := func() error {
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
	paths := []struct {
		name string
		call func() error
	}{{"grpc", getGRPC}, {"rest", getREST}}

	for _, p := range paths {
		if err := warmUp(p.call, benchClients(parallelism), 20); err != nil {
			b.Fatalf("warming up %s: %v", p.name, err)
		}
	}

	var mu sync.Mutex
	latency := map[string]time.Duration{}
	throughput := map[string]float64{}
	for _, p := range paths {
		b.Run(p.name+"/sequential", func(b *testing.B) {
			start := time.Now()
			for i := 0; i < b.N; i++ {
				if err := p.call(); err != nil {
					b.Fatal(err)
				}
			}
			per := time.Since(start) / time.Duration(b.N)
			b.ReportMetric(float64(per.Microseconds()), "µs/call")
			mu.Lock()
			latency[p.name] = per
			mu.Unlock()
		})
	}
	for _, p := range paths {
		b.Run(p.name+"/parallel", func(b *testing.B) {
			b.SetParallelism(parallelism)
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := p.call(); err != nil {
						b.Error(err)
						return
					}
				}
			})
			rps := float64(b.N) / time.Since(start).Seconds()
			b.ReportMetric(rps, "calls/s")
			mu.Lock()
			throughput[p.name] = rps
			mu.Unlock()
		})
	}
	if latency["grpc"] > 0 && latency["rest"] > 0 && throughput["grpc"] > 0 && throughput["rest"] > 0 {
		fmt.Printf("GetTask latency:    gRPC %v, REST via gateway %v (REST/gRPC = %.2fx)\n",
			latency["grpc"], latency["rest"], float64(latency["rest"])/float64(latency["grpc"]))
		fmt.Printf("GetTask throughput: gRPC %.0f calls/s, REST via gateway %.0f calls/s (gRPC/REST = %.2fx)\n",
			throughput["grpc"], throughput["rest"], throughput["grpc"]/throughput["rest"])
	}
}

// warmUp makes calls from clients goroutines at once, each calls times: the connections a
// run with that many clients needs exist before it is timed.
func warmUp(call func() error, clients, calls int) error {
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range calls {
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
