// Package app wires the agent service for platform.Main: its configuration, the clients of
// the services it calls, its store, workers and gRPC servers.
package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/thefold/thefold/pkg/config"
	"github.com/thefold/thefold/pkg/events"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	builderv1 "github.com/thefold/thefold/pkg/gen/thefold/builder/v1"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	memoryv1 "github.com/thefold/thefold/pkg/gen/thefold/memory/v1"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	skillsv1 "github.com/thefold/thefold/pkg/gen/thefold/skills/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/jobrun"
	"github.com/thefold/thefold/pkg/platform"
	"github.com/thefold/thefold/pkg/seal"

	"github.com/thefold/thefold/services/agent/internal/breaker"
	"github.com/thefold/thefold/services/agent/internal/chat"
	"github.com/thefold/thefold/services/agent/internal/linearsync"
	"github.com/thefold/thefold/services/agent/internal/loop"
	"github.com/thefold/thefold/services/agent/internal/monitor"
	"github.com/thefold/thefold/services/agent/internal/project"
	"github.com/thefold/thefold/services/agent/internal/repoevents"
	"github.com/thefold/thefold/services/agent/internal/service"
	"github.com/thefold/thefold/services/agent/internal/store"
	"github.com/thefold/thefold/services/agent/migrations"
)

// Config is the agent's own configuration, beside platform.Config.
type Config struct {
	// MaxJobs is how many jobs this process runs at once.
	MaxJobs int `env:"THEFOLD_AGENT_MAX_JOBS, default=4"`
	// Instance names this process in the jobs' audit logs (each run of a job records the
	// process that claimed it); empty: <hostname>-<pid>.
	Instance string `env:"THEFOLD_AGENT_INSTANCE_ID"`
	// LeaseExpiry is how long a job may go without its worker renewing its lease before
	// another worker resumes it (after a crash of the first).
	LeaseExpiry time.Duration `env:"THEFOLD_AGENT_LEASE_EXPIRY, default=15s"`
	// Backoff is the least wait after an environment_error diagnosis.
	Backoff time.Duration `env:"THEFOLD_AGENT_BACKOFF, default=30s"`
	// MaxAttempts bounds the attempts of one run; InterveneAfter is how many failed
	// attempts in a row call for ai.Intervene.
	MaxAttempts    int `env:"THEFOLD_AGENT_MAX_ATTEMPTS, default=5"`
	InterveneAfter int `env:"THEFOLD_AGENT_INTERVENE_AFTER, default=3"`
	// TasksPerHour and TasksPerDay cap the jobs one user starts (0: no cap).
	TasksPerHour int `env:"THEFOLD_AGENT_TASKS_PER_HOUR, default=20"`
	TasksPerDay  int `env:"THEFOLD_AGENT_TASKS_PER_DAY, default=100"`
	// The default budget of a job: tokens, dollars (micro-dollars), wall time.
	MaxTokens     int64         `env:"THEFOLD_AGENT_MAX_TOKENS, default=2000000"`
	MaxCostMicros int64         `env:"THEFOLD_AGENT_MAX_COST_MICROS, default=25000000"`
	MaxWallTime   time.Duration `env:"THEFOLD_AGENT_MAX_WALL_TIME, default=2h"`
	// CallTimeout bounds one model call (and a sandbox's creation).
	CallTimeout time.Duration `env:"THEFOLD_AGENT_CALL_TIMEOUT, default=10m"`
	// ContextTokens is the token budget of a job's relevant files.
	ContextTokens int `env:"THEFOLD_AGENT_CONTEXT_TOKENS, default=30000"`
	// MaxWatches bounds concurrent WatchJob streams, MaxWatchesPerUser those of one user
	// (so one cannot take every slot); WatchHeartbeat is how long one stays silent before
	// a heartbeat.
	MaxWatches        int           `env:"THEFOLD_AGENT_MAX_WATCHES, default=1024"`
	MaxWatchesPerUser int           `env:"THEFOLD_AGENT_MAX_WATCHES_PER_USER, default=32"`
	WatchHeartbeat    time.Duration `env:"THEFOLD_AGENT_WATCH_HEARTBEAT, default=15s"`
	// Breakers override the circuit breakers' rules: "service=failures/open,…", e.g.
	// "ai=5/60s,sandbox=3/30s" (defaults: ai, builder, github, memory, tasks, skills 5/60s;
	// sandbox 3/30s).
	Breakers string `env:"THEFOLD_AGENT_BREAKERS"`
	// ChatMaxRounds bounds the model calls of one chat reply (tool rounds plus the answer);
	// ChatContextTokens is how much of a conversation is sent to the model whole (older
	// turns are summarised).
	ChatMaxRounds     int `env:"THEFOLD_AGENT_CHAT_MAX_ROUNDS, default=10"`
	ChatContextTokens int `env:"THEFOLD_AGENT_CHAT_CONTEXT_TOKENS, default=60000"`
	// SecretKeyFile is the key (64 hex digits) that seals people's integration secrets
	// (webhook URLs, inbound signing secrets) at rest; empty:
	// $THEFOLD_DATA_DIR/keys/agent-secret.key, made on first start.
	SecretKeyFile string `env:"THEFOLD_AGENT_SECRET_KEY_FILE"`
	// DataDir is the local stack's data directory: the default secret key file is under it.
	DataDir string `env:"THEFOLD_DATA_DIR"`
	// WebhookHosts are the hosts integration webhooks may be posted to (https), beside
	// hooks.slack.com, discord.com and discordapp.com; a loopback address listed here may
	// be posted to over http (tests, a local relay).
	WebhookHosts []string `env:"THEFOLD_AGENT_WEBHOOK_HOSTS"`
	// WebhookBackoff is the wait after a webhook post's first failure (it doubles with each
	// retry, up to 5 minutes); a webhook that fails 5 times in a row is disabled.
	WebhookBackoff time.Duration `env:"THEFOLD_AGENT_WEBHOOK_BACKOFF, default=2s"`
	// LinearURL is Linear's GraphQL endpoint (empty: https://api.linear.app/graphql); a
	// test points it at a fake.
	LinearURL string `env:"THEFOLD_AGENT_LINEAR_URL"`
	// Events is how long job events are kept for watchers resuming from a cursor.
	Events events.RetentionConfig
}

// secretKeyPath is the key file sealing integration secrets, "" when there is none.
func (c *Config) secretKeyPath() string {
	switch {
	case c.SecretKeyFile != "":
		return c.SecretKeyFile
	case c.DataDir != "":
		return filepath.Join(c.DataDir, "keys", "agent-secret.key")
	}
	return ""
}

// Validate reports settings that would stop every job.
func (c *Config) Validate() error {
	var problems []error
	positive := func(name string, v int64) {
		if v <= 0 {
			problems = append(problems, fmt.Errorf("%s: must be positive", name))
		}
	}
	positive("THEFOLD_AGENT_MAX_JOBS", int64(c.MaxJobs))
	positive("THEFOLD_AGENT_MAX_ATTEMPTS", int64(c.MaxAttempts))
	positive("THEFOLD_AGENT_INTERVENE_AFTER", int64(c.InterveneAfter))
	positive("THEFOLD_AGENT_MAX_TOKENS", c.MaxTokens)
	positive("THEFOLD_AGENT_MAX_COST_MICROS", c.MaxCostMicros)
	positive("THEFOLD_AGENT_CONTEXT_TOKENS", int64(c.ContextTokens))
	positive("THEFOLD_AGENT_MAX_WATCHES", int64(c.MaxWatches))
	positive("THEFOLD_AGENT_MAX_WATCHES_PER_USER", int64(c.MaxWatchesPerUser))
	positive("THEFOLD_AGENT_CHAT_MAX_ROUNDS", int64(c.ChatMaxRounds))
	if c.ChatContextTokens < 2000 {
		problems = append(problems, errors.New("THEFOLD_AGENT_CHAT_CONTEXT_TOKENS: at least 2000"))
	}
	if _, err := breaker.ParseConfigs(c.Breakers, breaker.Defaults); err != nil {
		problems = append(problems, fmt.Errorf("THEFOLD_AGENT_BREAKERS: %w", err))
	}
	if c.TasksPerHour < 0 || c.TasksPerDay < 0 {
		problems = append(problems, errors.New("THEFOLD_AGENT_TASKS_PER_HOUR, THEFOLD_AGENT_TASKS_PER_DAY: must not be negative (0 is no cap)"))
	}
	if c.LeaseExpiry < 2*time.Second {
		problems = append(problems, errors.New("THEFOLD_AGENT_LEASE_EXPIRY: at least 2s (a lease is renewed every second)"))
	}
	if c.WebhookBackoff <= 0 {
		problems = append(problems, errors.New("THEFOLD_AGENT_WEBHOOK_BACKOFF: must be positive"))
	}
	if c.Backoff < 0 || c.MaxWallTime <= 0 || c.WatchHeartbeat <= 0 || c.CallTimeout <= 0 {
		problems = append(problems, errors.New("THEFOLD_AGENT_BACKOFF must not be negative; THEFOLD_AGENT_MAX_WALL_TIME, THEFOLD_AGENT_WATCH_HEARTBEAT and THEFOLD_AGENT_CALL_TIMEOUT must be positive"))
	}
	return errors.Join(append(problems, c.Events.Validate())...)
}

// runArgs is the job-queue job that runs (or resumes) one agent job. Any number may name
// the same job: only the one holding its lease runs it.
type runArgs struct {
	JobID  string `json:"job_id"`
	Resume string `json:"resume,omitempty"`
}

func (runArgs) Kind() string { return "agent_job_run" }

func (a runArgs) Job() string { return a.JobID }

// projectArgs is the job-queue job that runs (or resumes) one project.
type projectArgs struct {
	ProjectID string `json:"project_id"`
	Resume    string `json:"resume,omitempty"`
}

func (projectArgs) Kind() string { return "agent_project_run" }

func (a projectArgs) Job() string { return a.ProjectID }

// replyArgs is the job-queue job that runs (or resumes) one chat reply.
type replyArgs struct {
	ReplyID string `json:"reply_id"`
	Resume  string `json:"resume,omitempty"`
}

func (replyArgs) Kind() string { return "agent_chat_reply" }

func (a replyArgs) Job() string { return a.ReplyID }

// maxMessage is the largest answer the agent takes from another service.
const maxMessage = 64 << 20

func Service() platform.Service {
	return platform.Service{
		Name:       "agent",
		Schema:     "agent",
		Migrations: migrations.FS,
		Register: func(ctx context.Context, d *platform.Deps) error {
			var cfg Config
			if err := config.Load(ctx, &cfg, d.Lookup); err != nil {
				return err
			}
			if d.ServiceSigner == nil {
				return errors.New("agent: THEFOLD_AUTH_SERVICE_KEY_FILE is not set: jobs call the other services on behalf of their owners and need the agent's service identity (thefold init creates it)")
			}
			rules, err := breaker.ParseConfigs(cfg.Breakers, breaker.Defaults)
			if err != nil {
				return err
			}
			breakers := breaker.New(rules, func(svc, from, to string) {
				d.Logger.Warn("circuit breaker", "service", svc, "from", from, "to", to)
			})
			dial := func(svc string) (*grpc.ClientConn, error) {
				// A build with its steps (content, outputs, fix rounds) outgrows gRPC's 4 MiB.
				opts := append(breakers.DialOptions(svc), grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessage)))
				return d.Conn(ctx, svc, opts...)
			}
			clients := loop.Clients{}
			for _, c := range []struct {
				svc string
				set func(*grpc.ClientConn)
			}{
				{"tasks", func(c *grpc.ClientConn) { clients.Tasks = tasksv1.NewTaskServiceClient(c) }},
				{"ai", func(c *grpc.ClientConn) {
					clients.AI, clients.Models = aiv1.NewAIServiceClient(c), aiv1.NewModelRegistryServiceClient(c)
				}},
				{"builder", func(c *grpc.ClientConn) { clients.Builder = builderv1.NewBuilderServiceClient(c) }},
				{"sandbox", func(c *grpc.ClientConn) { clients.Sandbox = sandboxv1.NewSandboxServiceClient(c) }},
				{"github", func(c *grpc.ClientConn) { clients.Repos = githubv1.NewRepoServiceClient(c) }},
				{"memory", func(c *grpc.ClientConn) { clients.Memory = memoryv1.NewMemoryServiceClient(c) }},
			} {
				cc, err := dial(c.svc)
				if err != nil {
					return err
				}
				c.set(cc)
			}
			// Skills are used when the skills service is configured; an address set empty on
			// purpose runs jobs without them.
			if addr, _ := d.Lookup.Lookup(platform.AddrEnv("skills")); addr != "" {
				cc, err := dial("skills")
				if err != nil {
					return err
				}
				clients.Skills = skillsv1.NewSkillServiceClient(cc)
			} else {
				d.Logger.WarnContext(ctx, "no skills service address: jobs run without skills", "env", platform.AddrEnv("skills"))
			}

			var box *seal.Box
			if path := cfg.secretKeyPath(); path != "" {
				key, err := seal.LoadKeyFile(path, cfg.SecretKeyFile == "")
				if err != nil {
					return err
				}
				if box, err = seal.New(key); err != nil {
					return err
				}
			} else {
				d.Logger.WarnContext(ctx, "no secret key (THEFOLD_AGENT_SECRET_KEY_FILE or THEFOLD_DATA_DIR): people cannot connect Slack or Discord")
			}
			hub := d.Events(&cfg.Events)
			st := store.New(d.Pool, hub)
			budget := &typev1.Budget{MaxTokens: cfg.MaxTokens, MaxCostMicros: cfg.MaxCostMicros, MaxWallTime: durationpb.New(cfg.MaxWallTime)}
			lc := loop.DefaultConfig
			lc.LeaseExpiry, lc.Backoff, lc.MaxAttempts, lc.InterveneAfter, lc.ContextTokens, lc.Budget, lc.CallTimeout =
				cfg.LeaseExpiry, cfg.Backoff, cfg.MaxAttempts, cfg.InterveneAfter, cfg.ContextTokens, budget, cfg.CallTimeout
			lc.Instance = cfg.Instance
			if lc.Instance == "" {
				host, _ := os.Hostname()
				lc.Instance = fmt.Sprintf("%s-%d", host, os.Getpid())
			}
			eng := loop.New(st, clients, d.ServiceSigner, lc, d.Logger)

			q, err := jobrun.NewQueue(ctx, d.Pool, jobrun.QueueConfig[runArgs]{
				Name: "jobs", MaxWorkers: cfg.MaxJobs, MaxAttempts: 25, Run: eng.Run,
				New: func(id string) runArgs { return runArgs{JobID: id, Resume: uuid.NewString()} },
			}, d.Logger)
			if err != nil {
				return fmt.Errorf("agent: %w", err)
			}
			d.Go("job worker", q.Serve)
			// The reaper also resumes each job a circuit breaker paused whose wait is over.
			d.Go("job reaper", func(ctx context.Context) error {
				return q.Reap(ctx, st, jobrun.ReapConfig{Expiry: cfg.LeaseExpiry, Also: func(ctx context.Context) error {
					_, err := st.ResumeDue(ctx, 100, q.Enqueue)
					return err
				}})
			})

			pc := project.DefaultConfig
			pc.LeaseExpiry, pc.ContextTokens, pc.CallTimeout, pc.JobBudget = cfg.LeaseExpiry, cfg.ContextTokens, cfg.CallTimeout, budget
			pc.RateLimit = store.RateLimit{PerHour: cfg.TasksPerHour, PerDay: cfg.TasksPerDay}
			var svc *service.Server // (made below: the crew's approvals go through its reviews)
			pc.Approve = func(ctx context.Context, owner, reviewID, comment string) error {
				return svc.ApproveAs(ctx, owner, reviewID, comment)
			}
			projects := project.NewRunner(st, project.Clients{Tasks: clients.Tasks, AI: clients.AI, Repos: clients.Repos,
				Sandbox: clients.Sandbox, Memory: clients.Memory}, d.ServiceSigner, pc, q, d.Logger)
			pq, err := jobrun.NewQueue(ctx, d.Pool, jobrun.QueueConfig[projectArgs]{
				Name: "projects", MaxWorkers: cfg.MaxJobs, MaxAttempts: 25, Run: projects.Run,
				New: func(id string) projectArgs { return projectArgs{ProjectID: id, Resume: uuid.NewString()} },
			}, d.Logger)
			if err != nil {
				return fmt.Errorf("agent: %w", err)
			}
			d.Go("project worker", pq.Serve)
			d.Go("project reaper", func(ctx context.Context) error {
				return pq.Reap(ctx, st.ProjectLeases(), jobrun.ReapConfig{Expiry: cfg.LeaseExpiry})
			})

			var linearSync *linearsync.Syncer
			if box != nil {
				lc := linearsync.DefaultConfig
				lc.BaseURL = cfg.LinearURL
				linearSync = linearsync.New(st, clients.Tasks, box, d.ServiceSigner, d.Auth.Verifier().UserDisabled, lc, d.Logger)
				// Linear connections, pulled and pushed as their owners.
				d.Go("linear sync", linearSync.Run)
			}
			var linearOpt service.LinearSyncer
			if linearSync != nil {
				linearOpt = linearSync
			}
			svc = service.New(st, service.Options{
				RateLimit: store.RateLimit{PerHour: cfg.TasksPerHour, PerDay: cfg.TasksPerDay}, Budget: budget,
				Heartbeat: cfg.WatchHeartbeat, MaxWatches: cfg.MaxWatches, MaxWatchesPerUser: cfg.MaxWatchesPerUser, Log: d.Logger, Stopper: eng, Queue: q,
				Tasks: clients.Tasks, Repos: clients.Repos, Sandbox: clients.Sandbox, Builder: clients.Builder, Memory: clients.Memory,
				AI: clients.AI, CallTimeout: cfg.CallTimeout, ProjectQueue: pq, ProjectStopper: projects,
				Secrets: box, WebhookHosts: cfg.WebhookHosts, Disabled: d.Auth.Verifier().UserDisabled, Linear: linearOpt,
			})
			cc := chat.DefaultConfig
			cc.MaxRounds, cc.ContextTokens, cc.LeaseExpiry, cc.CallTimeout = cfg.ChatMaxRounds, cfg.ChatContextTokens, cfg.LeaseExpiry, cfg.CallTimeout
			replies := chat.NewRunner(st, chat.Clients{AI: clients.AI, Tasks: clients.Tasks, Repos: clients.Repos, Memory: clients.Memory,
				Agent: svc, Projects: svc.Projects()}, d.ServiceSigner, cc, d.Logger)
			rq, err := jobrun.NewQueue(ctx, d.Pool, jobrun.QueueConfig[replyArgs]{
				Name: "replies", MaxWorkers: max(cfg.MaxJobs, 8), MaxAttempts: 25, Run: replies.Run,
				New: func(id string) replyArgs { return replyArgs{ReplyID: id, Resume: uuid.NewString()} },
			}, d.Logger)
			if err != nil {
				return fmt.Errorf("agent: %w", err)
			}
			d.Go("reply worker", rq.Serve)
			d.Go("reply reaper", func(ctx context.Context) error {
				return rq.Reap(ctx, st.ReplyLeases(), jobrun.ReapConfig{Expiry: cfg.LeaseExpiry})
			})
			d.Go("chat notifier", chat.NewNotifier(st, hub, d.Logger).Run)
			// GitHub webhook deliveries of connected repositories, acted on as their owners.
			d.Go("repo event processor", repoevents.NewProcessor(st, repoevents.Clients{Tasks: clients.Tasks, Repos: clients.Repos, Revisions: svc}, d.ServiceSigner, d.Auth.Verifier().UserDisabled,
				repoevents.DefaultConfig, d.Logger).Run)
			d.Go("repo event poller", repoevents.NewPoller(st, clients.Repos, d.ServiceSigner, repoevents.DefaultPollConfig, d.Logger).Run)
			// The repository monitor: the health checks of connected repositories.
			d.Go("repo health monitor", monitor.New(st, monitor.Clients{Sandbox: clients.Sandbox, Tasks: clients.Tasks, Agent: svc}, d.ServiceSigner,
				d.Auth.Verifier().UserDisabled, monitor.DefaultConfig, d.Logger).Run)
			if box != nil {
				dc := chat.DefaultDelivererConfig
				dc.Backoff = cfg.WebhookBackoff
				d.Go("notice deliverer", chat.NewDeliverer(st, box, chat.NewPoster(cfg.WebhookHosts), dc, d.Logger).Run)
			}

			if err := jobrun.Register(d.Server.Registry()); err != nil {
				return err
			}
			agentv1.RegisterAgentServiceServer(d.Server.GRPC(), svc)
			agentv1.RegisterReviewServiceServer(d.Server.GRPC(), svc.Reviews())
			agentv1.RegisterProjectServiceServer(d.Server.GRPC(), svc.Projects())
			agentv1.RegisterChatServiceServer(d.Server.GRPC(), svc.Chat(rq, replies))
			agentv1.RegisterPreferencesServiceServer(d.Server.GRPC(), svc.Preferences())
			agentv1.RegisterRepoEventServiceServer(d.Server.GRPC(), svc.RepoEvents())
			agentv1.RegisterRepoHealthServiceServer(d.Server.GRPC(), svc.RepoHealth())
			agentv1.RegisterLinearServiceServer(d.Server.GRPC(), svc.Linear())
			// A disabled owner's jobs are cancelled (the gateway's revocations say who).
			d.OnOwnerDisabled(func(ctx context.Context, owner string) error {
				_, err := svc.CancelOwnerJobs(ctx, owner, service.ReasonOwnerDisabled)
				return err
			})
			return nil
		},
	}
}
