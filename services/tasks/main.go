// Command tasks is TheFold's task engine: tasks, their statuses and blocked-by graph,
// statistics, a stream of task events and an ordering of open tasks made by the ai service,
// over gRPC in its own PostgreSQL schema.
package main

import (
	"context"
	"errors"
	"time"

	"github.com/thefold/thefold/pkg/config"
	"github.com/thefold/thefold/pkg/events"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	"github.com/thefold/thefold/pkg/platform"

	"github.com/thefold/thefold/services/tasks/internal/service"
	"github.com/thefold/thefold/services/tasks/internal/store"
	"github.com/thefold/thefold/services/tasks/migrations"
)

func main() { platform.Main(tasksService()) }

// tasksConfig is the tasks service's own configuration, beside platform.Config.
type tasksConfig struct {
	// MaxWatches bounds concurrent WatchTasks streams. Streams share one listening database
	// session (events.Hub) and read through the pool, so the bound is about goroutines and
	// read load, not sessions.
	MaxWatches int `env:"THEFOLD_TASKS_MAX_WATCHES, default=1024"`
	// MaxWatchesPerUser bounds the WatchTasks streams of one user, so one cannot take
	// every slot.
	MaxWatchesPerUser int `env:"THEFOLD_TASKS_MAX_WATCHES_PER_USER, default=32"`
	// WatchHeartbeat is how long a WatchTasks stream stays silent before a heartbeat.
	WatchHeartbeat time.Duration `env:"THEFOLD_TASKS_WATCH_HEARTBEAT, default=15s"`
	// OrderTimeout bounds one ai PlanTaskOrder call (a model ordering hundreds of tasks).
	OrderTimeout time.Duration `env:"THEFOLD_TASKS_ORDER_TIMEOUT, default=5m"`
	// Events is how long task events are kept for watchers resuming from a cursor.
	Events events.RetentionConfig
}

// Validate reports a limit that would refuse every watch or every ordering.
func (c *tasksConfig) Validate() error {
	var problems []error
	if c.MaxWatches <= 0 {
		problems = append(problems, errors.New("THEFOLD_TASKS_MAX_WATCHES: must be positive"))
	}
	if c.MaxWatchesPerUser <= 0 {
		problems = append(problems, errors.New("THEFOLD_TASKS_MAX_WATCHES_PER_USER: must be positive"))
	}
	if c.WatchHeartbeat <= 0 {
		problems = append(problems, errors.New("THEFOLD_TASKS_WATCH_HEARTBEAT: must be positive"))
	}
	if c.OrderTimeout <= 0 {
		problems = append(problems, errors.New("THEFOLD_TASKS_ORDER_TIMEOUT: must be positive"))
	}
	return errors.Join(append(problems, c.Events.Validate())...)
}

// tasksService wires pool → store → service (with a client of the ai service) onto the
// platform's gRPC server.
func tasksService() platform.Service {
	return platform.Service{
		Name:       "tasks",
		Schema:     "tasks",
		Migrations: migrations.FS,
		Register: func(ctx context.Context, d *platform.Deps) error {
			var cfg tasksConfig
			if err := config.Load(ctx, &cfg, d.Lookup); err != nil {
				return err
			}
			hub := d.Events(&cfg.Events)
			opts := []service.Option{
				service.WithMaxWatches(cfg.MaxWatches), service.WithMaxWatchesPerUser(cfg.MaxWatchesPerUser), service.WithHeartbeat(cfg.WatchHeartbeat),
				service.WithOrderTimeout(cfg.OrderTimeout), service.WithLogger(d.Logger),
			}
			// PlanTaskOrder calls the ai service. An address set empty on purpose runs tasks
			// without it (PlanTaskOrder then answers FAILED_PRECONDITION); the connection is
			// lazy, so an ai service that is not up yet delays nothing here.
			if addr, _ := d.Lookup.Lookup(platform.AddrEnv("ai")); addr != "" {
				conn, err := d.Conn(ctx, "ai")
				if err != nil {
					return err
				}
				opts = append(opts, service.WithAI(aiv1.NewAIServiceClient(conn)))
			} else {
				d.Logger.WarnContext(ctx, "no ai service address: PlanTaskOrder is off", "env", platform.AddrEnv("ai"))
			}
			// ImportIssues lists issues through the github service; without its address it
			// answers FAILED_PRECONDITION.
			if addr, _ := d.Lookup.Lookup(platform.AddrEnv("github")); addr != "" {
				conn, err := d.Conn(ctx, "github")
				if err != nil {
					return err
				}
				opts = append(opts, service.WithGitHub(githubv1.NewRepoServiceClient(conn)))
			} else {
				d.Logger.WarnContext(ctx, "no github service address: ImportIssues is off", "env", platform.AddrEnv("github"))
			}
			svc := service.New(store.New(d.Pool, hub), opts...)
			tasksv1.RegisterTaskServiceServer(d.Server.GRPC(), svc)
			return nil
		},
	}
}
