package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/db"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/protoenum"
)

// ModelPurposes are the keys Preferences.default_models takes.
var ModelPurposes = []string{"planning", "coding", "review", "chat"}

// DefaultPreferences are the preferences of user who never set any: no sub-agents, their
// outputs concatenated, balanced model selection, no default models or job caps of their
// own, every notification on.
func DefaultPreferences(user string) *agentv1.Preferences {
	return &agentv1.Preferences{
		UserId:        user,
		SubAgentMerge: aiv1.MergeStrategy_MERGE_STRATEGY_CONCATENATE,
		BudgetMode:    aiv1.BudgetMode_BUDGET_MODE_BALANCED,
		DefaultModels: map[string]string{},
		JobBudget:     &typev1.Budget{},
		Notifications: &agentv1.NotificationSettings{ReviewReady: true, JobCompleted: true, JobFailed: true, Clarification: true},
	}
}

// normalizePreferences reads the contract's UNSPECIFIED values as what they mean
// (CONCATENATE, BALANCED) and gives every message field a value, so that what is stored
// and returned says the same thing one way.
func normalizePreferences(p *agentv1.Preferences) {
	if p.SubAgentMerge == aiv1.MergeStrategy_MERGE_STRATEGY_UNSPECIFIED {
		p.SubAgentMerge = aiv1.MergeStrategy_MERGE_STRATEGY_CONCATENATE
	}
	if p.BudgetMode == aiv1.BudgetMode_BUDGET_MODE_UNSPECIFIED {
		p.BudgetMode = aiv1.BudgetMode_BUDGET_MODE_BALANCED
	}
	if p.DefaultModels == nil {
		p.DefaultModels = map[string]string{}
	}
	maps.DeleteFunc(p.DefaultModels, func(_, v string) bool { return v == "" })
	if p.JobBudget == nil {
		p.JobBudget = &typev1.Budget{}
	}
	if p.Notifications == nil {
		p.Notifications = DefaultPreferences("").Notifications
	}
}

// queryRower is a pool or a transaction.
type queryRower interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

const preferenceColumns = `sub_agents_enabled, sub_agent_merge, budget_mode, default_models, job_max_tokens, job_max_cost_micros,
	job_max_wall_time, notify_review_ready, notify_job_completed, notify_job_failed, notify_clarification, update_time`

// preferences reads user's preferences through q (lock: FOR UPDATE); the defaults, with no
// update time, when the user has no row.
func preferences(ctx context.Context, q queryRower, user string, lock bool) (*agentv1.Preferences, error) {
	sql := `SELECT ` + preferenceColumns + ` FROM user_preferences WHERE user_id = $1`
	if lock {
		sql += ` FOR UPDATE`
	}
	var (
		merge, mode string
		models      []byte
		wall        time.Duration
		updated     time.Time
		p           = DefaultPreferences(user)
		b, n        = p.JobBudget, p.Notifications
	)
	err := q.QueryRow(ctx, sql, user).Scan(&p.SubAgentsEnabled, &merge, &mode, &models, &b.MaxTokens, &b.MaxCostMicros, &wall,
		&n.ReviewReady, &n.JobCompleted, &n.JobFailed, &n.Clarification, &updated)
	if errors.Is(err, pgx.ErrNoRows) {
		return p, nil
	}
	if err != nil {
		return nil, err
	}
	p.SubAgentMerge = protoenum.Parse[aiv1.MergeStrategy](merge, "MERGE_STRATEGY_", aiv1.MergeStrategy_value)
	p.BudgetMode = protoenum.Parse[aiv1.BudgetMode](mode, "BUDGET_MODE_", aiv1.BudgetMode_value)
	if err := json.Unmarshal(models, &p.DefaultModels); err != nil {
		return nil, fmt.Errorf("store: preferences of %s: default_models: %w", user, err)
	}
	if wall > 0 {
		b.MaxWallTime = durationpb.New(wall)
	}
	p.UpdateTime = timestamppb.New(updated)
	normalizePreferences(p)
	return p, nil
}

// GetPreferences returns user's preferences, the defaults for what they never set.
func (s *Store) GetPreferences(ctx context.Context, user string) (*agentv1.Preferences, error) {
	return preferences(ctx, s.pool, user, false)
}

// UpdatePreferences sets the fields of user's preferences that paths name (paths of
// Preferences, as PreferencesPaths lists them; checked by the caller) to their values in
// in, in one transaction, and returns the preferences as they now are. A message field
// named whole and unset in in goes back to its defaults; a default_models entry set empty
// is removed.
func (s *Store) UpdatePreferences(ctx context.Context, user string, in *agentv1.Preferences, paths []string) (*agentv1.Preferences, error) {
	var out *agentv1.Preferences
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		// The row exists (with the defaults) before it is locked, so that two first updates
		// of one user are serialised like any others.
		if _, err := tx.Exec(ctx, `INSERT INTO user_preferences (user_id) VALUES ($1) ON CONFLICT (user_id) DO NOTHING`, user); err != nil {
			return err
		}
		cur, err := preferences(ctx, tx, user, true)
		if err != nil {
			return err
		}
		if err := ApplyPreferences(cur, in, paths); err != nil {
			return err
		}
		normalizePreferences(cur)
		models, err := json.Marshal(cur.DefaultModels)
		if err != nil {
			return err
		}
		b, n := cur.JobBudget, cur.Notifications
		var updated time.Time
		err = tx.QueryRow(ctx, `UPDATE user_preferences SET sub_agents_enabled = $2, sub_agent_merge = $3, budget_mode = $4, default_models = $5,
			job_max_tokens = $6, job_max_cost_micros = $7, job_max_wall_time = $8, notify_review_ready = $9, notify_job_completed = $10,
			notify_job_failed = $11, notify_clarification = $12, update_time = now() WHERE user_id = $1 RETURNING update_time`,
			user, cur.SubAgentsEnabled, protoenum.Name(cur.SubAgentMerge, "MERGE_STRATEGY_"), protoenum.Name(cur.BudgetMode, "BUDGET_MODE_"),
			models, b.MaxTokens, b.MaxCostMicros, b.GetMaxWallTime().AsDuration(), n.ReviewReady, n.JobCompleted, n.JobFailed, n.Clarification).Scan(&updated)
		if err != nil {
			return err
		}
		cur.UpdateTime = timestamppb.New(updated)
		if cur.JobBudget.GetMaxWallTime().AsDuration() <= 0 {
			cur.JobBudget.MaxWallTime = nil
		}
		out = cur
		return nil
	})
	return out, err
}

// Moment is the moment of a job (or project) a notice tells of, as NotificationSettings
// names it: whether the notice is posted to the owner's integrations follows their
// preferences. MomentNone is a notice no setting governs (a job started, a notice of the
// integration itself): always posted.
type Moment string

// The moments.
const (
	MomentNone          Moment = ""
	MomentReviewReady   Moment = "review_ready"
	MomentJobCompleted  Moment = "job_completed"
	MomentJobFailed     Moment = "job_failed"
	MomentClarification Moment = "clarification"
)

// momentColumns are the user_preferences columns of the moments.
var momentColumns = map[Moment]string{
	MomentReviewReady:   "notify_review_ready",
	MomentJobCompleted:  "notify_job_completed",
	MomentJobFailed:     "notify_job_failed",
	MomentClarification: "notify_clarification",
}

// PreferencesPaths are the update_mask paths of Preferences: each field, each field of
// its job budget and notifications, and each purpose of default_models.
var PreferencesPaths = func() []string {
	out := []string{"sub_agents_enabled", "sub_agent_merge", "budget_mode", "default_models"}
	for _, p := range ModelPurposes {
		out = append(out, "default_models."+p)
	}
	out = append(out, "job_budget", "job_budget.max_tokens", "job_budget.max_cost_micros", "job_budget.max_wall_time", "notifications")
	for _, f := range notificationFields {
		out = append(out, "notifications."+f)
	}
	return out
}()

// notificationFields are NotificationSettings' fields.
var notificationFields = []string{"review_ready", "job_completed", "job_failed", "clarification"}

// ApplyPreferences sets the fields of cur that paths name to their values in in (see
// UpdatePreferences); a path it does not know is an error.
func ApplyPreferences(cur, in *agentv1.Preferences, paths []string) error {
	normalizePreferences(cur)
	for _, path := range paths {
		field, sub, _ := strings.Cut(path, ".")
		switch {
		case path == "sub_agents_enabled":
			cur.SubAgentsEnabled = in.GetSubAgentsEnabled()
		case path == "sub_agent_merge":
			cur.SubAgentMerge = in.GetSubAgentMerge()
		case path == "budget_mode":
			cur.BudgetMode = in.GetBudgetMode()
		case path == "default_models":
			cur.DefaultModels = maps.Clone(in.GetDefaultModels())
		case field == "default_models" && slices.Contains(ModelPurposes, sub):
			if v := in.GetDefaultModels()[sub]; v != "" {
				cur.DefaultModels[sub] = v
			} else {
				delete(cur.DefaultModels, sub)
			}
		case path == "job_budget":
			cur.JobBudget = proto.CloneOf(in.GetJobBudget())
		case path == "job_budget.max_tokens":
			cur.JobBudget.MaxTokens = in.GetJobBudget().GetMaxTokens()
		case path == "job_budget.max_cost_micros":
			cur.JobBudget.MaxCostMicros = in.GetJobBudget().GetMaxCostMicros()
		case path == "job_budget.max_wall_time":
			cur.JobBudget.MaxWallTime = proto.CloneOf(in.GetJobBudget().GetMaxWallTime())
		case path == "notifications":
			cur.Notifications = proto.CloneOf(in.GetNotifications())
		case field == "notifications" && slices.Contains(notificationFields, sub):
			n := in.GetNotifications()
			switch sub {
			case "review_ready":
				cur.Notifications.ReviewReady = n.GetReviewReady()
			case "job_completed":
				cur.Notifications.JobCompleted = n.GetJobCompleted()
			case "job_failed":
				cur.Notifications.JobFailed = n.GetJobFailed()
			case "clarification":
				cur.Notifications.Clarification = n.GetClarification()
			}
		default:
			return fmt.Errorf("store: preferences: unknown path %q", path)
		}
		// A message named whole and left unset goes back to its defaults.
		normalizePreferences(cur)
	}
	return nil
}
