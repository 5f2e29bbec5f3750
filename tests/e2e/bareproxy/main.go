// Command bareproxy is the benchmark's floor for a REST edge: the least any Go REST→gRPC
// proxy in its own process does for GET /v1/tasks/{id} — read the HTTP request, call the
// tasks service's GetTask over one plain gRPC connection with the caller's Authorization,
// write the answer as JSON — and nothing else: no verification, budgets, tracing, metrics,
// logs, request ids, headers or error mapping. BenchmarkGetTask runs it beside the gateway,
// so the price of the machine's extra process hop is printed apart from the gateway's own.
//
// With -grpc-gateway it serves the same route through grpc-gateway's generated handler
// instead (runtime.ServeMux and RegisterTaskServiceHandlerClient, the marshaler the edge
// uses, nothing else): the least any REST edge built on grpc-gateway does, the library the
// architecture names for the edge. The benchmark prints the gateway against both floors, so
// what grpc-gateway itself costs is told apart from what the edge adds.
//
//	bareproxy -tasks 127.0.0.1:7002 [-grpc-gateway]   (prints the address it listens on)
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
)

func main() {
	tasks := flag.String("tasks", "", "the tasks service's gRPC address")
	viaGateway := flag.Bool("grpc-gateway", false, "serve the route through grpc-gateway's generated handler")
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
	if *viaGateway {
		mux := runtime.NewServeMux(runtime.WithMarshalerOption(runtime.MIMEWildcard, &runtime.JSONPb{MarshalOptions: marshal}))
		if err := tasksv1.RegisterTaskServiceHandlerClient(context.Background(), mux, client); err != nil {
			fmt.Fprintln(os.Stderr, "bareproxy:", err)
			os.Exit(1)
		}
		fmt.Fprintln(os.Stderr, "bareproxy:", http.Serve(lis, mux))
		os.Exit(1)
	}
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
