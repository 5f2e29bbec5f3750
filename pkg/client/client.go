// Package client is the Go client of TheFold's gRPC API: one Client holds a connection to
// each of the nine services and hands out their generated clients, with what every caller
// otherwise gets wrong done once:
//
//   - authentication: an access token, or an API key exchanged for short-lived tokens
//     (IdentityService.ExchangeAPIKey) and renewed before they expire;
//   - idempotency: a side-effecting request sent without a request_id gets a fresh one, so
//     that a retry of it (by gRPC on UNAVAILABLE, or by the caller) takes effect once;
//   - retries: every RPC is retried on UNAVAILABLE (a service restarting) — read-only ones
//     are safe to repeat, side-effecting ones carry their request_id, and the contract's
//     other RPCs are idempotent by their nature (pkg/contracts checks that);
//   - deadlines: a unary call without one gets Config.Timeout;
//   - a service that is restarting is waited for within the call's deadline.
//
// The addresses default to the documented ports on Config.Host (127.0.0.1): a local stack
// (thefold up, docker compose) needs only a token.
//
//	c, err := client.New(client.Config{Token: token})
//	if err != nil { … }
//	defer c.Close()
//	task, err := c.Tasks().CreateTask(ctx, &tasksv1.CreateTaskRequest{Title: "Add a health endpoint", Repo: "local/demo"})
//	job, err := c.Agent().StartTask(ctx, &agentv1.StartTaskRequest{TaskId: task.Task.Id})
package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	builderv1 "github.com/thefold/thefold/pkg/gen/thefold/builder/v1"
	gatewayv1 "github.com/thefold/thefold/pkg/gen/thefold/gateway/v1"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	memoryv1 "github.com/thefold/thefold/pkg/gen/thefold/memory/v1"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	skillsv1 "github.com/thefold/thefold/pkg/gen/thefold/skills/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	"github.com/thefold/thefold/pkg/grpcclient"
	"github.com/thefold/thefold/pkg/platform"
)

// Config says where TheFold is and who calls it.
type Config struct {
	// Host is where the services listen on their documented ports (tasks 9101, …,
	// gateway 9109); default 127.0.0.1.
	Host string
	// Addrs overrides a service's address ("host:port"), by service name ("tasks", "agent",
	// …).
	Addrs map[string]string
	// Token is an access token (thefold token, a login). APIKey, when set instead, is
	// exchanged for short-lived tokens.
	Token  string
	APIKey string
	// Timeout bounds unary calls without a deadline (default 30s).
	Timeout time.Duration
	// DialOptions are added to every connection (tests).
	DialOptions []grpc.DialOption
}

// FromEnv is the configuration the environment gives: THEFOLD_TOKEN, THEFOLD_API_KEY,
// THEFOLD_HOST and each service's THEFOLD_<SERVICE>_ADDR.
func FromEnv() Config {
	c := Config{Token: os.Getenv("THEFOLD_TOKEN"), APIKey: os.Getenv("THEFOLD_API_KEY"), Host: os.Getenv("THEFOLD_HOST"), Addrs: map[string]string{}}
	for _, s := range platform.ServiceNames {
		if a := os.Getenv(platform.AddrEnv(s)); a != "" {
			c.Addrs[s] = a
		}
	}
	return c
}

// Addr is service's address under c.
func (c Config) Addr(service string) string {
	if a := c.Addrs[service]; a != "" {
		return a
	}
	host := c.Host
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, strconv.Itoa(platform.GRPCPorts[service]))
}

// Client is a connection to each TheFold service (made on first use).
type Client struct {
	cfg   Config
	token *tokenSource

	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
}

// New returns a client; nothing is dialled until a service is first used.
func New(cfg Config) (*Client, error) {
	if cfg.Token != "" && cfg.APIKey != "" {
		return nil, errors.New("client: give a token or an API key, not both")
	}
	c := &Client{cfg: cfg, conns: map[string]*grpc.ClientConn{}}
	c.token = &tokenSource{static: cfg.Token, apiKey: cfg.APIKey, exchange: func(ctx context.Context, key string) (*gatewayv1.ExchangeAPIKeyResponse, error) {
		return gatewayv1.NewIdentityServiceClient(c.conn("gateway")).ExchangeAPIKey(ctx, &gatewayv1.ExchangeAPIKeyRequest{ApiKey: key})
	}}
	return c, nil
}

// Close closes every connection.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, cc := range c.conns {
		errs = append(errs, cc.Close())
	}
	c.conns = map[string]*grpc.ClientConn{}
	return errors.Join(errs...)
}

// retryAll are TheFold's services, every RPC of which is retried on UNAVAILABLE (see the
// package doc).
var retryAll = sync.OnceValue(func() []string {
	var out []string
	protoregistry.GlobalFiles.RangeFiles(func(f protoreflect.FileDescriptor) bool {
		for i := 0; i < f.Services().Len(); i++ {
			if name := string(f.Services().Get(i).FullName()); strings.HasPrefix(name, "thefold.") {
				out = append(out, name)
			}
		}
		return true
	})
	return out
})

// conn is service's connection, dialled on first use.
func (c *Client) conn(service string) *grpc.ClientConn {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cc, ok := c.conns[service]; ok {
		return cc
	}
	opts := append([]grpc.DialOption{
		grpc.WithChainUnaryInterceptor(c.unary),
		grpc.WithChainStreamInterceptor(c.stream),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64 << 20)),
	}, c.cfg.DialOptions...)
	cc, err := grpcclient.Dial(c.cfg.Addr(service), grpcclient.Options{Timeout: c.cfg.Timeout, RetryMethods: retryAll(), DialOptions: opts})
	if err != nil {
		// Dial only parses the target: an address that does not parse fails every call.
		cc, _ = grpc.NewClient("passthrough:///invalid-address", grpc.WithChainUnaryInterceptor(failing(err)))
	}
	c.conns[service] = cc
	return cc
}

func failing(err error) grpc.UnaryClientInterceptor {
	return func(context.Context, string, any, any, *grpc.ClientConn, grpc.UnaryInvoker, ...grpc.CallOption) error {
		return err
	}
}

// authorized is ctx with the client's token, unless the caller set one.
func (c *Client) authorized(ctx context.Context, method string) (context.Context, error) {
	if method == gatewayv1.IdentityService_ExchangeAPIKey_FullMethodName {
		return ctx, nil
	}
	if md, ok := metadata.FromOutgoingContext(ctx); ok && len(md.Get("authorization")) > 0 {
		return ctx, nil
	}
	tok, err := c.token.get(ctx)
	if err != nil || tok == "" {
		return ctx, err
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok), nil
}

func (c *Client) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	ctx, err := c.authorized(ctx, method)
	if err != nil {
		return err
	}
	if m, ok := req.(proto.Message); ok {
		req = withRequestID(m)
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (c *Client) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	ctx, err := c.authorized(ctx, method)
	if err != nil {
		return nil, err
	}
	return streamer(ctx, desc, cc, method, opts...)
}

// withRequestID is m with a fresh request_id when it has an empty one (a copy: the
// caller's message is not changed, so the caller's own retry gets another id only when it
// asks for it by leaving the field empty).
func withRequestID(m proto.Message) proto.Message {
	r := m.ProtoReflect()
	fd := r.Descriptor().Fields().ByName("request_id")
	if fd == nil || fd.Kind() != protoreflect.StringKind || fd.IsList() || r.Get(fd).String() != "" {
		return m
	}
	out := proto.Clone(m)
	out.ProtoReflect().Set(fd, protoreflect.ValueOfString(uuid.NewString()))
	return out
}

// tokenSource is the token calls carry: a static one, or one exchanged for the API key and
// renewed a minute before it expires.
type tokenSource struct {
	static, apiKey string
	exchange       func(ctx context.Context, key string) (*gatewayv1.ExchangeAPIKeyResponse, error)

	mu      sync.Mutex
	current string
	expires time.Time
}

func (t *tokenSource) get(ctx context.Context) (string, error) {
	if t.apiKey == "" {
		return t.static, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.current != "" && time.Until(t.expires) > time.Minute {
		return t.current, nil
	}
	resp, err := t.exchange(ctx, t.apiKey)
	if err != nil {
		return "", fmt.Errorf("client: exchange the API key for a token: %w", err)
	}
	t.current, t.expires = resp.GetAccessToken(), resp.GetExpireTime().AsTime()
	return t.current, nil
}

// The services' clients.

func (c *Client) Tasks() tasksv1.TaskServiceClient {
	return tasksv1.NewTaskServiceClient(c.conn("tasks"))
}
func (c *Client) Agent() agentv1.AgentServiceClient {
	return agentv1.NewAgentServiceClient(c.conn("agent"))
}
func (c *Client) Reviews() agentv1.ReviewServiceClient {
	return agentv1.NewReviewServiceClient(c.conn("agent"))
}
func (c *Client) Projects() agentv1.ProjectServiceClient {
	return agentv1.NewProjectServiceClient(c.conn("agent"))
}
func (c *Client) Chat() agentv1.ChatServiceClient {
	return agentv1.NewChatServiceClient(c.conn("agent"))
}
func (c *Client) Preferences() agentv1.PreferencesServiceClient {
	return agentv1.NewPreferencesServiceClient(c.conn("agent"))
}
func (c *Client) RepoEvents() agentv1.RepoEventServiceClient {
	return agentv1.NewRepoEventServiceClient(c.conn("agent"))
}
func (c *Client) RepoHealth() agentv1.RepoHealthServiceClient {
	return agentv1.NewRepoHealthServiceClient(c.conn("agent"))
}
func (c *Client) Linear() agentv1.LinearServiceClient {
	return agentv1.NewLinearServiceClient(c.conn("agent"))
}
func (c *Client) Builder() builderv1.BuilderServiceClient {
	return builderv1.NewBuilderServiceClient(c.conn("builder"))
}
func (c *Client) AI() aiv1.AIServiceClient { return aiv1.NewAIServiceClient(c.conn("ai")) }
func (c *Client) Models() aiv1.ModelRegistryServiceClient {
	return aiv1.NewModelRegistryServiceClient(c.conn("ai"))
}
func (c *Client) Sandbox() sandboxv1.SandboxServiceClient {
	return sandboxv1.NewSandboxServiceClient(c.conn("sandbox"))
}
func (c *Client) Repos() githubv1.RepoServiceClient {
	return githubv1.NewRepoServiceClient(c.conn("github"))
}
func (c *Client) Memory() memoryv1.MemoryServiceClient {
	return memoryv1.NewMemoryServiceClient(c.conn("memory"))
}
func (c *Client) Skills() skillsv1.SkillServiceClient {
	return skillsv1.NewSkillServiceClient(c.conn("skills"))
}
func (c *Client) Auth() gatewayv1.AuthServiceClient {
	return gatewayv1.NewAuthServiceClient(c.conn("gateway"))
}
func (c *Client) Users() gatewayv1.UserServiceClient {
	return gatewayv1.NewUserServiceClient(c.conn("gateway"))
}
