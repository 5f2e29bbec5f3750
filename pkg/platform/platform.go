// Package platform is the common main of every TheFold service: configuration, logging,
// tracing, the database (schema, migrations), the gRPC server with authentication, clients
// for the other services, and graceful shutdown. A service supplies its name, schema,
// migrations and a Register function that wires its handlers; everything else is here.
package platform

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/config"
	"github.com/thefold/thefold/pkg/db"
	"github.com/thefold/thefold/pkg/events"
	gatewayv1 "github.com/thefold/thefold/pkg/gen/thefold/gateway/v1"
	"github.com/thefold/thefold/pkg/grpcclient"
	"github.com/thefold/thefold/pkg/logging"
	"github.com/thefold/thefold/pkg/server"
	"github.com/thefold/thefold/pkg/telemetry"
)

// Config is what every service reads from the environment.
type Config struct {
	Server    server.Config
	DB        db.Config
	Auth      auth.Config
	Telemetry telemetry.Config
	// LogLevel is the least severe level logged: debug, info, warn or error.
	LogLevel string `env:"THEFOLD_LOG_LEVEL, default=info"`
	// MigrateOnStart applies the service's schema migrations when it starts; off where a
	// deployment migrates as a separate step.
	MigrateOnStart bool `env:"THEFOLD_MIGRATE_ON_START, default=true"`
}

// Service describes one TheFold service.
type Service struct {
	Name string
	// Schema is the PostgreSQL schema the service owns.
	Schema     string
	Migrations fs.FS
	// DBOptions configure the service's pool (db.AfterConnect for its own types).
	DBOptions []db.Option
	// PublicMethods are full method names callable without a token (login RPCs).
	PublicMethods []string
	// Register wires the service's handlers onto d.Server. It runs after migrations.
	Register func(ctx context.Context, d *Deps) error
}

// Deps are what Register gets to wire a service.
type Deps struct {
	Name   string
	Logger *slog.Logger
	Config Config
	Pool   *pgxpool.Pool
	Server *server.Server
	// Lookup reads service-specific configuration (config.Load(ctx, &cfg, d.Lookup)).
	Lookup config.Lookuper
	// Auth authenticates incoming RPCs; its Verifier follows the gateway's revocations.
	// The gateway sets its own API key exchanger on it.
	Auth *auth.Authenticator
	// ServiceSigner is the service's own identity, for calls made for an owner whose
	// token may have expired (auth.OnBehalfOf) or is an API key's, narrowed by scopes
	// (auth.Authenticator.SetServiceSigner); nil unless THEFOLD_AUTH_SERVICE_KEY_FILE is set
	// (thefold up and docker-compose set it for every service).
	ServiceSigner *auth.ServiceSigner

	mu      sync.Mutex
	conns   map[string]*grpc.ClientConn
	closers []func()
	// Background work is a group in the errgroup style: the first task to fail records its
	// error and calls fail, which stops the server. The tasks' context (bgCtx) is separate
	// from the server's: it ends only after the gRPC drain, because handlers still running
	// in the drain (streams fed by an event hub, say) depend on that work.
	bgCtx    context.Context
	bgCancel context.CancelFunc
	bg       sync.WaitGroup
	err      error
	fail     func(error)
}

func (d *Deps) initLocked() {
	if d.bgCtx == nil {
		d.bgCtx, d.bgCancel = context.WithCancel(context.Background())
	}
}

// Go runs fn in the background for the life of the service (event hubs, workers, extra
// listeners). Its context ends after the server has drained. If fn returns an error before
// then, the service stops and Run returns that error: a service with a dead worker must not
// go on reporting SERVING. Returning nil just ends the task.
func (d *Deps) Go(name string, fn func(ctx context.Context) error) {
	d.mu.Lock()
	d.initLocked()
	ctx := d.bgCtx
	d.bg.Add(1)
	d.mu.Unlock()
	go func() {
		defer d.bg.Done()
		if err := fn(ctx); err != nil && ctx.Err() == nil {
			d.setErr(fmt.Errorf("%s: %w", name, err))
		}
	}()
}

func (d *Deps) setErr(err error) {
	d.mu.Lock()
	first := d.err == nil
	if first {
		d.err = err
	}
	fail := d.fail
	d.mu.Unlock()
	if first && d.Logger != nil {
		d.Logger.Error("background task failed; stopping", "err", err)
	}
	if first && fail != nil {
		fail(err)
	}
}

// Err is the first error a background task returned, or nil.
func (d *Deps) Err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}

// OnClose registers fn to run at shutdown, after the server has stopped, in reverse order.
func (d *Deps) OnClose(fn func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closers = append(d.closers, fn)
}

// Close stops the background tasks, waits for them, then runs the OnClose functions in
// reverse order. The service calls it after the drain; tests that build Deps themselves
// call it.
func (d *Deps) Close() {
	d.mu.Lock()
	d.initLocked()
	cancel := d.bgCancel
	d.mu.Unlock()
	cancel()
	d.bg.Wait()
	d.mu.Lock()
	closers := d.closers
	d.closers = nil
	d.mu.Unlock()
	for i := len(closers) - 1; i >= 0; i-- {
		closers[i]()
	}
}

// Events starts the service's events hub (the fan-out of its events table to Watch streams)
// for the life of the service and, with a retention, the pruning of old events; the stores
// of services that serve Watch RPCs take the hub.
func (d *Deps) Events(retention *events.RetentionConfig) *events.Hub {
	hub := events.NewHub(d.Pool, events.WithLogger(d.Logger))
	d.Go("events hub", hub.Run)
	if retention != nil {
		d.Go("events retention", func(ctx context.Context) error {
			return hub.RunRetention(ctx, retention.Every, retention.MaxAge)
		})
	}
	return hub
}

// OnOwnerDisabled runs stop for every owner the gateway disables (its revocations say who),
// for the life of the service: a service with long-running work of an owner's (the agent's
// jobs, the builder's builds) stops it there.
func (d *Deps) OnOwnerDisabled(stop func(ctx context.Context, owner string) error) {
	d.Go("disabled owners", func(ctx context.Context) error {
		return auth.OwnersDisabled(ctx, d.Auth.Verifier(), d.Logger, stop)
	})
}

// Conn returns a (shared) client connection to another service, found through its
// THEFOLD_<SERVICE>_ADDR variable. opts (interceptors such as circuit breakers) apply when
// the connection is first made.
func (d *Deps) Conn(ctx context.Context, service string, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if c, ok := d.conns[service]; ok {
		return c, nil
	}
	addr, ok := d.Lookup.Lookup(AddrEnv(service))
	if !ok || addr == "" {
		return nil, fmt.Errorf("platform: no address for service %q (%s)", service, AddrEnv(service))
	}
	c, err := grpcclient.Dial(addr, grpcclient.Options{RetryMethods: grpcclient.ReadOnlyMethods("thefold." + service + ".v1"), DialOptions: opts})
	if err != nil {
		return nil, err
	}
	if d.conns == nil {
		d.conns = map[string]*grpc.ClientConn{}
	}
	d.conns[service] = c
	d.closers = append(d.closers, func() { _ = c.Close() })
	return c, nil
}

// Main runs svc as the process's main: `<binary>` or `<binary> serve` serves,
// `<binary> migrate` applies migrations and exits. Only Main exits the process.
func Main(svc Service) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := Run(ctx, svc, config.Env(Defaults(svc.Name)), os.Args[1:], os.Stderr); err != nil {
		// The service's own logger is built inside Run; this one only reports why it ended.
		logging.New(os.Stderr, svc.Name, slog.LevelInfo).Error("stopped", "err", err)
		os.Exit(1)
	}
}

// Run is Main without the process: tests call it with a map Lookuper.
func Run(ctx context.Context, svc Service, lookup config.Lookuper, args []string, logOut io.Writer) error {
	cmd := "serve"
	if len(args) > 0 {
		cmd = args[0]
	}
	switch cmd {
	case "healthcheck":
		// For container health checks: images built FROM scratch have no curl.
		var cfg struct {
			AdminAddr string `env:"THEFOLD_ADMIN_ADDR"`
		}
		if err := config.Load(ctx, &cfg, lookup); err != nil {
			return err
		}
		return Healthcheck(ctx, cfg.AdminAddr)
	case "migrate":
		// Migrating needs only the database: it runs as a job before the service exists.
		var cfg struct {
			DB       db.Config
			LogLevel string `env:"THEFOLD_LOG_LEVEL, default=info"`
		}
		if err := config.Load(ctx, &cfg, lookup); err != nil {
			return err
		}
		log := logging.New(logOut, svc.Name, logging.ParseLevel(cfg.LogLevel))
		if err := db.Migrate(ctx, cfg.DB.URL, svc.Schema, svc.Migrations); err != nil {
			return err
		}
		log.Info("migrated", "schema", svc.Schema)
		return nil
	case "serve":
		var cfg Config
		if err := config.Load(ctx, &cfg, lookup); err != nil {
			return err
		}
		return serve(ctx, svc, cfg, lookup, logging.New(logOut, svc.Name, logging.ParseLevel(cfg.LogLevel)))
	default:
		return fmt.Errorf("unknown command %q (want serve, migrate or healthcheck)", cmd)
	}
}

func serve(ctx context.Context, svc Service, cfg Config, lookup config.Lookuper, log *slog.Logger) (err error) {
	redacted := config.Redacted(&cfg)
	attrs := make([]any, 0, len(redacted)*2)
	for _, k := range config.SortedKeys(redacted) {
		attrs = append(attrs, k, redacted[k])
	}
	log.Info("starting", slog.Group("config", attrs...))

	shutdownTracing, err := telemetry.Setup(ctx, svc.Name, cfg.Telemetry)
	if err != nil {
		return err
	}
	defer func() { _ = shutdownTracing(context.Background()) }()

	verifier, err := cfg.Auth.NewVerifier()
	if err != nil {
		return err
	}
	serviceSigner, err := cfg.Auth.NewServiceSigner(svc.Name)
	if err != nil {
		return err
	}
	if cfg.MigrateOnStart {
		if err := db.Migrate(ctx, cfg.DB.URL, svc.Schema, svc.Migrations); err != nil {
			return err
		}
	}
	pool, err := db.Open(ctx, cfg.DB.URL, svc.Schema, cfg.DB.MaxConns, svc.DBOptions...)
	if err != nil {
		return err
	}
	defer pool.Close()

	authn := auth.NewAuthenticator(verifier, svc.PublicMethods...)
	srv, err := server.New(server.Options{
		Name:   svc.Name,
		Config: cfg.Server,
		Logger: log,
		Auth:   authn,
		Ready:  pool.Ping,
	})
	if err != nil {
		return err
	}
	if err := srv.Listen(); err != nil {
		return err // a busy port fails the start, before any background work exists
	}
	// runCtx ends on a signal or when a background task fails; either stops the server.
	runCtx, stopRun := context.WithCancelCause(ctx)
	defer stopRun(nil)
	d := &Deps{Name: svc.Name, Logger: log, Config: cfg, Pool: pool, Server: srv, Lookup: lookup,
		Auth: authn, fail: stopRun}
	d.ServiceSigner = serviceSigner
	if serviceSigner != nil {
		authn.SetServiceSigner(serviceSigner) // calls made for an API key's owner: see there
	}
	// Background work ends after the drain (Close), not at the signal: see Deps.
	defer d.Close()
	if cfg.Auth.FollowRevocations {
		followIdentity(runCtx, d, cfg.Auth)
	}
	if svc.Register != nil {
		if err := svc.Register(runCtx, d); err != nil {
			return fmt.Errorf("register %s: %w", svc.Name, err)
		}
	}
	if err := srv.Run(runCtx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	d.Close()
	return d.Err()
}

// followIdentity keeps the service's verifier honest: it follows the gateway's
// revocations, accepts API keys by exchanging them with the gateway, and reloads the
// public key file after a rotation.
func followIdentity(ctx context.Context, d *Deps, cfg auth.Config) {
	v := d.Auth.Verifier()
	d.Auth.SetKeyExchanger(func(ctx context.Context, apiKey string) (string, error) {
		conn, err := d.Conn(ctx, "gateway")
		if err != nil {
			return "", err
		}
		resp, err := gatewayv1.NewIdentityServiceClient(conn).ExchangeAPIKey(grpcclient.FailFast(ctx), &gatewayv1.ExchangeAPIKeyRequest{ApiKey: apiKey})
		return resp.GetAccessToken(), err
	})
	d.Go("token revocations", func(bg context.Context) error {
		// The gateway serves revocations only to services, each as itself.
		if d.ServiceSigner == nil {
			d.Logger.Warn("token revocations are not followed: this service has no service identity (THEFOLD_AUTH_SERVICE_KEY_FILE)")
			return nil
		}
		conn, err := d.Conn(ctx, "gateway")
		if err != nil {
			d.Logger.Warn("token revocations are not followed", "err", err)
			return nil
		}
		return auth.FollowRevocations(auth.AsService(bg, d.ServiceSigner), gatewayv1.NewIdentityServiceClient(conn), v, d.Logger)
	})
	d.Go("public keys", func(bg context.Context) error {
		return auth.WatchKeyFile(bg, cfg.PublicKeyFile, v, d.Logger)
	})
}

// Healthcheck asks the admin port at adminAddr (":9201" means this host) whether the
// service is ready; nil when /readyz answers 200.
func Healthcheck(ctx context.Context, adminAddr string) error {
	host, port, err := net.SplitHostPort(adminAddr)
	if err != nil {
		return fmt.Errorf("healthcheck: admin address %q: %w", adminAddr, err)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(host, port)+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: /readyz answered %s", resp.Status)
	}
	return nil
}
