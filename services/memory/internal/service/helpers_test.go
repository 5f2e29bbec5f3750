package service_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/thefold/thefold/pkg/db/dbtest"
	"github.com/thefold/thefold/pkg/embed"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	memoryv1 "github.com/thefold/thefold/pkg/gen/thefold/memory/v1"
	"github.com/thefold/thefold/pkg/grpcclient"
	"github.com/thefold/thefold/pkg/grpctest"

	"github.com/thefold/thefold/services/memory/internal/service"
	"github.com/thefold/thefold/services/memory/internal/store"
	"github.com/thefold/thefold/services/memory/migrations"
)

// embedServer answers AIService.Embed as the ai service does with no provider set up: with
// TheFold's local embedder (pkg/embed) under its versioned names — "local" (and
// "local-<size>") is the current version, "local@N" version N, and the answer names the
// exact version. Version 1 is pkg/embed's Local, version 2 its Trained, as in the ai
// service. The current version starts at 1; tests switch it as shipping a new embedder
// does, count the calls and texts, and make calls fail.
type embedServer struct {
	aiv1.UnimplementedAIServiceServer
	current atomic.Int32
	calls   atomic.Int64
	texts   atomic.Int64
	// failAfter, when positive, is how many calls are answered before the rest are
	// UNAVAILABLE.
	failAfter atomic.Int64
}

func newEmbedServer() *embedServer {
	e := &embedServer{}
	e.current.Store(1)
	return e
}

func (e *embedServer) Embed(_ context.Context, req *aiv1.EmbedRequest) (*aiv1.EmbedResponse, error) {
	n := e.calls.Add(1)
	if f := e.failAfter.Load(); f > 0 && n > f {
		return nil, status.Error(codes.Unavailable, "the embedder is down")
	}
	version, dims := int(e.current.Load()), embed.DefaultDims
	switch name := req.GetModel(); {
	case name == "" || name == "local":
	case strings.HasPrefix(name, "local-"):
		d, err := strconv.Atoi(strings.TrimPrefix(name, "local-"))
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "model: %q", name)
		}
		dims = d
	case name == "local@1" || name == "local@2":
		version = int(name[len(name)-1] - '0')
	default:
		return nil, status.Errorf(codes.InvalidArgument, "model: %q is not an embedding model", name)
	}
	if req.GetDimensions() != 0 {
		dims = int(req.GetDimensions())
	}
	var local embed.Embedder
	var err error
	if version == 2 {
		local, err = embed.NewTrained(dims)
	} else {
		local, err = embed.New(dims)
	}
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "dimensions: %v", err)
	}
	e.texts.Add(int64(len(req.GetTexts())))
	resp := &aiv1.EmbedResponse{Model: fmt.Sprintf("local@%d", version), Dimensions: int32(dims)}
	for _, v := range local.Embed(req.GetTexts()) {
		resp.Embeddings = append(resp.Embeddings, &aiv1.Embedding{Values: v})
	}
	return resp, nil
}

// lazy is a client connection set once the test server listens.
type lazy struct{ cc grpc.ClientConnInterface }

func (l *lazy) Invoke(ctx context.Context, m string, a, r any, o ...grpc.CallOption) error {
	return l.cc.Invoke(ctx, m, a, r, o...)
}

func (l *lazy) NewStream(ctx context.Context, d *grpc.StreamDesc, m string, o ...grpc.CallOption) (grpc.ClientStream, error) {
	return l.cc.NewStream(ctx, d, m, o...)
}

// env is a memory server (and the Embed it calls, on the same server, reached over
// loopback gRPC with the caller's identity forwarded) on its own database.
type env struct {
	client memoryv1.MemoryServiceClient
	pool   *pgxpool.Pool
	srv    *service.Server
	cfg    service.Config
	ai     *embedServer
	conn   grpc.ClientConnInterface // to the test server, for other services' clients
	alice  context.Context
	bob    context.Context
	agent  context.Context // the agent service, for alice
	admin  context.Context
	anon   context.Context
	grpc   *grpctest.Env
}

func start(t testing.TB, cfg service.Config) *env {
	t.Helper()
	pool, _ := dbtest.NewDatabase(t, "memory", migrations.FS, store.DBOptions()...)
	return startOn(t, pool, cfg)
}

// startOn is start on the database of pool: another replica of the service, or the service
// started again.
func startOn(t testing.TB, pool *pgxpool.Pool, cfg service.Config) *env {
	t.Helper()
	if cfg.Fusion == "" {
		cfg = service.Config{HybridAlpha: 0.4, Fusion: "alpha", Candidates: 40, TextPool: 1000, MaxContent: 32000, VectorRanking: "scan", ScanPool: 1000}
	}
	conn := &lazy{}
	fake := newEmbedServer()
	srv := service.New(cfg, store.New(pool), aiv1.NewAIServiceClient(conn))
	e := grpctest.Start(t, func(s *grpc.Server) {
		memoryv1.RegisterMemoryServiceServer(s, srv)
		aiv1.RegisterAIServiceServer(s, fake)
	})
	cc, err := grpcclient.Dial(e.Server.Addr(), grpcclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	conn.cc = cc
	service.WithServiceSigner(e.ServiceSigner(t, "memory"))(srv)
	return &env{client: memoryv1.NewMemoryServiceClient(cc), pool: pool, srv: srv, cfg: cfg, ai: fake, conn: cc, alice: e.Context(t, "alice"),
		bob: e.Context(t, "bob"), agent: e.ServiceContext(t, "agent", "alice"), admin: e.Context(t, "root", "admin"),
		anon: context.Background(), grpc: e}
}

func (e *env) store(t testing.TB, ctx context.Context, req *memoryv1.StoreMemoryRequest) *memoryv1.Memory {
	t.Helper()
	resp, err := e.client.StoreMemory(ctx, req)
	if err != nil {
		t.Fatalf("StoreMemory: %v", err)
	}
	return resp.GetMemory()
}

func wantCode(t testing.TB, err error, code codes.Code, field string) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("got %v, want %v", err, code)
	}
	if field != "" && !strings.Contains(status.Convert(err).Message(), field) {
		t.Fatalf("error %q does not name %q", status.Convert(err).Message(), field)
	}
}
