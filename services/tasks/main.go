// Command tasks is TheFold's task engine: tasks, their statuses and blocked-by graph,
// statistics and a stream of task events, over gRPC in its own PostgreSQL schema.
package main

import (
	"context"
	"errors"
	"time"

	"github.com/thefold/thefold/pkg/config"
	"github.com/thefold/thefold/pkg/events"
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
	// WatchHeartbeat is how long a WatchTasks stream stays silent before a heartbeat.
	WatchHeartbeat time.Duration `env:"THEFOLD_TASKS_WATCH_HEARTBEAT, default=15s"`
	// Events is how long task events are kept for watchers resuming from a cursor.
	Events events.RetentionConfig
}

// Validate reports a limit that would refuse every watch.
func (c *tasksConfig) Validate() error {
	var problems []error
	if c.MaxWatches <= 0 {
		problems = append(problems, errors.New("THEFOLD_TASKS_MAX_WATCHES: must be positive"))
	}
	if c.WatchHeartbeat <= 0 {
		problems = append(problems, errors.New("THEFOLD_TASKS_WATCH_HEARTBEAT: must be positive"))
	}
	return errors.Join(append(problems, c.Events.Validate())...)
}

// tasksService wires pool → store → service onto the platform's gRPC server.
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
			hub := events.NewHub(d.Pool, events.WithLogger(d.Logger))
			d.Go("events hub", hub.Run)
			d.Go("events retention", func(ctx context.Context) error {
				return hub.RunRetention(ctx, cfg.Events.Every, cfg.Events.MaxAge)
			})
			svc := service.New(store.New(d.Pool, hub),
				service.WithMaxWatches(cfg.MaxWatches), service.WithHeartbeat(cfg.WatchHeartbeat))
			tasksv1.RegisterTaskServiceServer(d.Server.GRPC(), svc)
			return nil
		},
	}
}
