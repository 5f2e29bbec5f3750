// Command bareproxy is the benchmark's floor for a REST edge: the least any Go REST→gRPC
// proxy in its own process does for GET /v1/tasks/{id} — read the HTTP request, call the
// tasks service's GetTask over one plain gRPC connection with the caller's Authorization,
// write the answer as JSON — and nothing else: no verification, budgets, tracing, metrics,
// logs, request ids, headers or error mapping. BenchmarkGetTask runs it beside the gateway,
// so the price of the machine's extra process hop is printed apart from the gateway's own.
//
//	bareproxy -tasks 127.0.0.1:7002   (prints the address it listens on)
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
)

func main() {
	tasks := flag.String("tasks", "", "the tasks service's gRPC address")
	flag.Parse()
	if *tasks == "" {
		fmt.Fprintln(os.Stderr, "bareproxy: -tasks is required")
		os.Exit(2)
	}
	conn, err := grpc.NewClient(*tasks, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Fprintln(os.Stderr, "bareproxy:", err)
		os.Exit(1)
	}
	client := tasksv1.NewTaskServiceClient(conn)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bareproxy:", err)
		os.Exit(1)
	}
	fmt.Println(lis.Addr().String())
	marshal := protojson.MarshalOptions{UseProtoNames: true}
	err = http.Serve(lis, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := strings.CutPrefix(r.URL.Path, "/v1/tasks/")
		if !ok || r.Method != http.MethodGet {
			http.NotFound(w, r)
			return
		}
		ctx := metadata.AppendToOutgoingContext(r.Context(), "authorization", r.Header.Get("Authorization"))
		resp, err := client.GetTask(ctx, &tasksv1.GetTaskRequest{Id: id})
		if err != nil {
			http.Error(w, status.Convert(err).Message(), http.StatusBadGateway)
			return
		}
		b, err := marshal.Marshal(resp)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	}))
	fmt.Fprintln(os.Stderr, "bareproxy:", err)
	os.Exit(1)
}
