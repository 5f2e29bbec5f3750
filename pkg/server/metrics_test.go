package server_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	"github.com/thefold/thefold/pkg/grpctest"
)

// TestMetricsUseStandardNamesAndLabels scrapes /metrics after calls and expects the
// go-grpc-middleware provider's series: grpc_server_handled_total and
// grpc_server_handling_seconds labelled by grpc_service, grpc_method, grpc_type and
// grpc_code, counting the code the client saw.
func TestMetricsUseStandardNamesAndLabels(t *testing.T) {
	t.Parallel()
	env := grpctest.StartWithAdmin(t, func(s *grpc.Server) { tasksv1.RegisterTaskServiceServer(s, probe{}) })
	c := tasksv1.NewTaskServiceClient(env.Conn)
	ctx := env.Context(t, "u1")
	if _, err := c.CreateTask(ctx, &tasksv1.CreateTaskRequest{}); err != nil {
		t.Fatalf("CreateTask: %v", err)
	}
	if _, err := c.DeleteTask(ctx, &tasksv1.DeleteTaskRequest{}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("DeleteTask: %v", err)
	}
	_, _ = c.ListTasks(ctx, &tasksv1.ListTasksRequest{}) // a raw error, masked as Internal

	families := scrape(t, "http://"+env.Server.AdminAddr()+"/metrics")
	const svc = "thefold.tasks.v1.TaskService"
	cases := []struct {
		family string
		labels map[string]string
		want   float64
	}{
		{"grpc_server_handled_total", map[string]string{"grpc_service": svc, "grpc_method": "CreateTask", "grpc_type": "unary", "grpc_code": "OK"}, 1},
		{"grpc_server_handled_total", map[string]string{"grpc_service": svc, "grpc_method": "DeleteTask", "grpc_type": "unary", "grpc_code": "Unimplemented"}, 1},
		{"grpc_server_handled_total", map[string]string{"grpc_service": svc, "grpc_method": "ListTasks", "grpc_type": "unary", "grpc_code": "Internal"}, 1},
		{"grpc_server_started_total", map[string]string{"grpc_service": svc, "grpc_method": "CreateTask", "grpc_type": "unary"}, 1},
		// Initialized at start: a method not called yet has its series at 0.
		{"grpc_server_handled_total", map[string]string{"grpc_service": svc, "grpc_method": "WatchTasks", "grpc_type": "server_stream", "grpc_code": "OK"}, 0},
		{"grpc_server_handling_seconds", map[string]string{"grpc_service": svc, "grpc_method": "CreateTask", "grpc_type": "unary"}, 1},
	}
	for _, tc := range cases {
		got, ok := value(families[tc.family], tc.labels)
		if !ok {
			t.Errorf("%s%v: no such series", tc.family, tc.labels)
			continue
		}
		if got != tc.want {
			t.Errorf("%s%v = %v, want %v", tc.family, tc.labels, got, tc.want)
		}
	}
}

func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics = %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(strings.NewReader(string(b)))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return families
}

// value is a counter's value, or a histogram's sample count, of the series with exactly labels.
func value(f *dto.MetricFamily, labels map[string]string) (float64, bool) {
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		if len(m.GetLabel()) != len(labels) {
			continue
		}
		for _, l := range m.GetLabel() {
			if labels[l.GetName()] != l.GetValue() {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}
