// Package app wires the builder service for platform.Main: its configuration, the clients of
// the services it calls, its store, workers and gRPC servers.
package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/google/uuid"

	"github.com/thefold/thefold/pkg/config"
	"github.com/thefold/thefold/pkg/events"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	builderv1 "github.com/thefold/thefold/pkg/gen/thefold/builder/v1"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	skillsv1 "github.com/thefold/thefold/pkg/gen/thefold/skills/v1"
	"github.com/thefold/thefold/pkg/jobrun"
	"github.com/thefold/thefold/pkg/platform"

	"github.com/thefold/thefold/services/builder/internal/engine"
	"github.com/thefold/thefold/services/builder/internal/service"
	"github.com/thefold/thefold/services/builder/internal/store"
	"github.com/thefold/thefold/services/builder/migrations"
)

// Config is the builder's own configuration, beside platform.Config.
type Config struct {
	// MaxBuilds is how many builds this process runs at once.
	MaxBuilds int `env:"THEFOLD_BUILDER_MAX_BUILDS, default=4"`
	// LeaseExpiry is how long a build may go without its worker renewing its lease before
	// another worker resumes it (after a crash of the first).
	LeaseExpiry time.Duration `env:"THEFOLD_BUILDER_LEASE_EXPIRY, default=15s"`
	// Instance names this process on the builds it claims (BuildJob.instance), so where a
	// build ran is known when several builders share the queue; default host-pid.
	Instance string `env:"THEFOLD_BUILDER_INSTANCE_ID"`
	// ContextBudget is the tokens of finished dependency files given to one generation in
	// full (counted with the tokenizer); beyond it, outlines.
	ContextBudget int `env:"THEFOLD_BUILDER_CONTEXT_BUDGET, default=60000"`
	// ReferenceBudget is the tokens of repository outlines given to one generation or fix
	// beside its dependencies (declarations, signatures and doc comments of the files the
	// agent's context phase found, of the target's directory and of the packages it
	// imports, in that order; the one that does not fit is cut); 0 gives none.
	ReferenceBudget int `env:"THEFOLD_BUILDER_REFERENCE_BUDGET, default=6000"`
	// MaxFixRounds bounds one file's fix rounds; MaxIterations the integrate phase's.
	MaxFixRounds  int `env:"THEFOLD_BUILDER_MAX_FIX_ROUNDS, default=3"`
	MaxIterations int `env:"THEFOLD_BUILDER_MAX_ITERATIONS, default=3"`
	// CallTimeout bounds one model call; ValidateTimeout one validation or command.
	CallTimeout     time.Duration `env:"THEFOLD_BUILDER_CALL_TIMEOUT, default=10m"`
	ValidateTimeout time.Duration `env:"THEFOLD_BUILDER_VALIDATE_TIMEOUT, default=15m"`
	// MaxWatches bounds concurrent WatchBuild streams, MaxWatchesPerUser those of one user
	// (so one cannot take every slot); WatchHeartbeat is how long one stays silent before
	// a heartbeat.
	MaxWatches        int           `env:"THEFOLD_BUILDER_MAX_WATCHES, default=1024"`
	MaxWatchesPerUser int           `env:"THEFOLD_BUILDER_MAX_WATCHES_PER_USER, default=32"`
	WatchHeartbeat    time.Duration `env:"THEFOLD_BUILDER_WATCH_HEARTBEAT, default=15s"`
	// Events is how long build events are kept for watchers resuming from a cursor.
	Events events.RetentionConfig
}

// Validate reports settings that would stop every build.
func (c *Config) Validate() error {
	var problems []error
	positive := func(name string, v int) {
		if v <= 0 {
			problems = append(problems, fmt.Errorf("%s: must be positive", name))
		}
	}
	positive("THEFOLD_BUILDER_MAX_BUILDS", c.MaxBuilds)
	positive("THEFOLD_BUILDER_CONTEXT_BUDGET", c.ContextBudget)
	positive("THEFOLD_BUILDER_MAX_WATCHES", c.MaxWatches)
	positive("THEFOLD_BUILDER_MAX_WATCHES_PER_USER", c.MaxWatchesPerUser)
	if c.MaxFixRounds < 0 || c.MaxIterations < 0 {
		problems = append(problems, errors.New("THEFOLD_BUILDER_MAX_FIX_ROUNDS, THEFOLD_BUILDER_MAX_ITERATIONS: must not be negative"))
	}
	if c.ReferenceBudget < 0 {
		problems = append(problems, errors.New("THEFOLD_BUILDER_REFERENCE_BUDGET: must not be negative (0 gives no reference outlines)"))
	}
	if c.LeaseExpiry < 2*time.Second {
		problems = append(problems, errors.New("THEFOLD_BUILDER_LEASE_EXPIRY: at least 2s (a lease is renewed every second)"))
	}
	if c.CallTimeout <= 0 || c.ValidateTimeout <= 0 {
		problems = append(problems, errors.New("THEFOLD_BUILDER_CALL_TIMEOUT, THEFOLD_BUILDER_VALIDATE_TIMEOUT: must be positive"))
	}
	if c.WatchHeartbeat <= 0 {
		problems = append(problems, errors.New("THEFOLD_BUILDER_WATCH_HEARTBEAT: must be positive"))
	}
	return errors.Join(append(problems, c.Events.Validate())...)
}

// runArgs is the job that runs (or resumes) one build. Resume tells the reaper's jobs from
// StartBuild's and RetryStep's; any number of jobs may name the same build, since only the
// one holding the build's lease runs it.
type runArgs struct {
	BuildID string `json:"build_id"`
	Resume  string `json:"resume,omitempty"`
}

func (runArgs) Kind() string { return "build_run" }

func (a runArgs) Job() string { return a.BuildID }

func Service() platform.Service {
	return platform.Service{
		Name:       "builder",
		Schema:     "builder",
		Migrations: migrations.FS,
		Register: func(ctx context.Context, d *platform.Deps) error {
			var cfg Config
			if err := config.Load(ctx, &cfg, d.Lookup); err != nil {
				return err
			}
			if d.ServiceSigner == nil {
				return errors.New("builder: THEFOLD_AUTH_SERVICE_KEY_FILE is not set: builds call the ai and sandbox services on behalf of their owners and need the builder's service identity (thefold init creates it)")
			}
			aiConn, err := d.Conn(ctx, "ai")
			if err != nil {
				return err
			}
			sbConn, err := d.Conn(ctx, "sandbox")
			if err != nil {
				return err
			}
			sb := sandboxv1.NewSandboxServiceClient(sbConn)

			hub := d.Events(&cfg.Events)
			st := store.New(d.Pool, hub)
			st.Instance = cfg.Instance
			if st.Instance == "" {
				host, _ := os.Hostname()
				st.Instance = fmt.Sprintf("%s-%d", host, os.Getpid())
			}
			// Skills are injected into generations when the skills service is configured;
			// an address set empty on purpose builds without them.
			var skills skillsv1.SkillServiceClient
			if addr, _ := d.Lookup.Lookup(platform.AddrEnv("skills")); addr != "" {
				conn, err := d.Conn(ctx, "skills")
				if err != nil {
					return err
				}
				skills = skillsv1.NewSkillServiceClient(conn)
			} else {
				d.Logger.WarnContext(ctx, "no skills service address: builds run without injected skills", "env", platform.AddrEnv("skills"))
			}
			eng := engine.New(st, aiv1.NewAIServiceClient(aiConn), sb, skills, d.ServiceSigner, engine.Config{
				LeaseExpiry: cfg.LeaseExpiry, RenewEvery: time.Second, ContextBudget: cfg.ContextBudget, ReferenceBudget: cfg.ReferenceBudget,
				MaxFixRounds: cfg.MaxFixRounds, MaxIterations: cfg.MaxIterations,
				CallTimeout: cfg.CallTimeout, ValidateTimeout: cfg.ValidateTimeout,
			}, d.Logger)
			if err := eng.Register(d.Server.Registry()); err != nil {
				return err
			}
			if err := jobrun.Register(d.Server.Registry()); err != nil {
				return err
			}

			q, err := jobrun.NewQueue(ctx, d.Pool, jobrun.QueueConfig[runArgs]{
				Name: "builds", MaxWorkers: cfg.MaxBuilds, MaxAttempts: 10, Run: eng.Run,
				New: func(id string) runArgs { return runArgs{BuildID: id, Resume: uuid.NewString()} },
			}, d.Logger)
			if err != nil {
				return fmt.Errorf("builder: %w", err)
			}
			d.Go("build worker", q.Serve)
			d.Go("build reaper", func(ctx context.Context) error {
				return q.Reap(ctx, st, jobrun.ReapConfig{Expiry: cfg.LeaseExpiry})
			})

			svc := service.New(st, q, eng, sb, cfg.WatchHeartbeat, cfg.MaxWatches, cfg.MaxWatchesPerUser, d.Logger)
			builderv1.RegisterBuilderServiceServer(d.Server.GRPC(), svc)
			// A disabled owner's builds are cancelled (the gateway's revocations say who).
			d.OnOwnerDisabled(func(ctx context.Context, owner string) error {
				_, err := svc.CancelOwnerBuilds(ctx, owner, service.ReasonOwnerDisabled)
				return err
			})
			return nil
		},
	}
}
