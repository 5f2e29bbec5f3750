package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
)

// BenchmarkGetTask measures GetTask directly over gRPC against the tasks service and over
// REST through the gateway (which adds JSON transcoding and a second gRPC hop), sequentially
// (latency) and with parallel clients (throughput), and prints the REST/gRPC ratios.
func BenchmarkGetTask(b *testing.B) {
	ctx := authed(context.Background())
	client := tasksv1.NewTaskServiceClient(dial(b, "tasks"))
	created, err := client.CreateTask(ctx, &tasksv1.CreateTaskRequest{Title: "bench", Repo: "local/bench"})
	if err != nil {
		b.Fatal(err)
	}
	id := created.GetTask().GetId()
	httpClient := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	url := mesh.GatewayURL() + "/v1/tasks/" + id

	getGRPC := func() error {
		_, err := client.GetTask(ctx, &tasksv1.GetTaskRequest{Id: id})
		return err
	}
	getREST := func() error {
		req, _ := http.NewRequest("GET", url, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := httpClient.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}

	var mu sync.Mutex
	latency := map[string]time.Duration{}
	throughput := map[string]float64{}
	for _, tc := range []struct {
		name string
		call func() error
	}{{"grpc", getGRPC}, {"rest", getREST}} {
		b.Run(tc.name+"/sequential", func(b *testing.B) {
			start := time.Now()
			for i := 0; i < b.N; i++ {
				if err := tc.call(); err != nil {
					b.Fatal(err)
				}
			}
			per := time.Since(start) / time.Duration(b.N)
			b.ReportMetric(float64(per.Microseconds()), "µs/call")
			mu.Lock()
			latency[tc.name] = per
			mu.Unlock()
		})
		b.Run(tc.name+"/parallel", func(b *testing.B) {
			b.SetParallelism(8)
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := tc.call(); err != nil {
						b.Error(err)
						return
					}
				}
			})
			rps := float64(b.N) / time.Since(start).Seconds()
			b.ReportMetric(rps, "calls/s")
			mu.Lock()
			throughput[tc.name] = rps
			mu.Unlock()
		})
	}
	if latency["grpc"] > 0 && throughput["rest"] > 0 {
		fmt.Printf("GetTask latency:    gRPC %v, REST via gateway %v (REST/gRPC = %.2fx)\n",
			latency["grpc"], latency["rest"], float64(latency["rest"])/float64(latency["grpc"]))
		fmt.Printf("GetTask throughput: gRPC %.0f calls/s, REST via gateway %.0f calls/s (gRPC/REST = %.2fx)\n",
			throughput["grpc"], throughput["rest"], throughput["grpc"]/throughput["rest"])
	}
}
