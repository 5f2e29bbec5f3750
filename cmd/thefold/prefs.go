package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/thefold/thefold/pkg/client"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// modelPurposes are the purposes a default model is set for (Preferences.default_models).
var modelPurposes = []string{"planning", "coding", "review", "chat"}

// notifyMoments are the job moments a notification is set for (NotificationSettings).
var notifyMoments = []string{"review_ready", "job_completed", "job_failed", "clarification"}

// enumValues are an enum's values by their lower-case names without prefix (not UNSPECIFIED).
func enumValues(names map[string]int32, prefix string) map[string]int32 {
	out := map[string]int32{}
	for n, v := range names {
		if v != 0 {
			out[strings.ToLower(strings.TrimPrefix(n, prefix))] = v
		}
	}
	return out
}

// parseEnumFlag is the value named v (any case, - for _) among values, else a usage error
// listing them.
func parseEnumFlag(flag, v string, values map[string]int32) (int32, error) {
	if n, ok := values[strings.ReplaceAll(strings.ToLower(strings.TrimSpace(v)), "-", "_")]; ok {
		return n, nil
	}
	names := make([]string, 0, len(values))
	for n := range values {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int { return int(values[a] - values[b]) })
	return 0, usageError{fmt.Errorf("--%s %q: one of %s", flag, v, strings.Join(names, ", "))}
}

// parseSwitch is on or off (true, false, yes, no).
func parseSwitch(flag, v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "on", "true", "yes":
		return true, nil
	case "off", "false", "no":
		return false, nil
	}
	return false, usageError{fmt.Errorf("--%s %q: on or off", flag, v)}
}

// parseDollars is an amount of dollars ("2.50", "$2.50") in micro-dollars.
func parseDollars(flag, v string) (int64, error) {
	f, err := strconv.ParseFloat(strings.TrimPrefix(strings.TrimSpace(v), "$"), 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || f > math.MaxInt64/1e6 {
		return 0, usageError{fmt.Errorf("--%s %q: want dollars, e.g. 2.50 (0: the server's default)", flag, v)}
	}
	return int64(math.Round(f * 1e6)), nil
}

// prefsUpdate is `thefold prefs set`'s flags as an UpdatePreferences request: only the
// flags given (changed) are in its update_mask.
func prefsUpdate(changed func(flag string) bool, user, subAgents, mode, merge string, models, notify []string, tokens int64, cost string, wall time.Duration) (*agentv1.UpdatePreferencesRequest, error) {
	p := &agentv1.Preferences{UserId: user, JobBudget: &typev1.Budget{}, Notifications: &agentv1.NotificationSettings{}}
	var paths []string
	if changed("sub-agents") {
		on, err := parseSwitch("sub-agents", subAgents)
		if err != nil {
			return nil, err
		}
		p.SubAgentsEnabled, paths = on, append(paths, "sub_agents_enabled")
	}
	if changed("budget-mode") {
		v, err := parseEnumFlag("budget-mode", mode, enumValues(aiv1.BudgetMode_value, "BUDGET_MODE_"))
		if err != nil {
			return nil, err
		}
		p.BudgetMode, paths = aiv1.BudgetMode(v), append(paths, "budget_mode")
	}
	if changed("merge") {
		v, err := parseEnumFlag("merge", merge, enumValues(aiv1.MergeStrategy_value, "MERGE_STRATEGY_"))
		if err != nil {
			return nil, err
		}
		p.SubAgentMerge, paths = aiv1.MergeStrategy(v), append(paths, "sub_agent_merge")
	}
	for _, m := range models {
		purpose, id, ok := strings.Cut(m, "=")
		purpose = strings.ToLower(strings.TrimSpace(purpose))
		if !ok || !slices.Contains(modelPurposes, purpose) {
			return nil, usageError{fmt.Errorf("--model %q: want PURPOSE=MODEL_ID (PURPOSE= to clear) with PURPOSE one of %s", m, strings.Join(modelPurposes, ", "))}
		}
		if p.DefaultModels == nil {
			p.DefaultModels = map[string]string{}
		}
		p.DefaultModels[purpose] = strings.TrimSpace(id)
		if path := "default_models." + purpose; !slices.Contains(paths, path) {
			paths = append(paths, path)
		}
	}
	if changed("job-max-tokens") {
		if tokens < 0 {
			return nil, usageError{fmt.Errorf("--job-max-tokens %d: must not be negative (0: the server's default)", tokens)}
		}
		p.JobBudget.MaxTokens, paths = tokens, append(paths, "job_budget.max_tokens")
	}
	if changed("job-max-cost") {
		micros, err := parseDollars("job-max-cost", cost)
		if err != nil {
			return nil, err
		}
		p.JobBudget.MaxCostMicros, paths = micros, append(paths, "job_budget.max_cost_micros")
	}
	if changed("job-max-wall-time") {
		if wall < 0 {
			return nil, usageError{fmt.Errorf("--job-max-wall-time %s: must not be negative (0: the server's default)", wall)}
		}
		p.JobBudget.MaxWallTime, paths = durationpb.New(wall), append(paths, "job_budget.max_wall_time")
	}
	for _, n := range notify {
		moment, v, ok := strings.Cut(n, "=")
		moment = strings.ToLower(strings.TrimSpace(moment))
		if !ok || !slices.Contains(notifyMoments, moment) {
			return nil, usageError{fmt.Errorf("--notify %q: want MOMENT=on|off with MOMENT one of %s", n, strings.Join(notifyMoments, ", "))}
		}
		on, err := parseSwitch("notify "+moment, v)
		if err != nil {
			return nil, err
		}
		switch moment {
		case "review_ready":
			p.Notifications.ReviewReady = on
		case "job_completed":
			p.Notifications.JobCompleted = on
		case "job_failed":
			p.Notifications.JobFailed = on
		case "clarification":
			p.Notifications.Clarification = on
		}
		if path := "notifications." + moment; !slices.Contains(paths, path) {
			paths = append(paths, path)
		}
	}
	if len(paths) == 0 {
		return nil, usageError{errors.New("nothing to change: give at least one of --sub-agents, --budget-mode, --merge, --model, --job-max-tokens, --job-max-cost, --job-max-wall-time, --notify")}
	}
	return &agentv1.UpdatePreferencesRequest{Preferences: p, UpdateMask: &fieldmaskpb.FieldMask{Paths: paths}}, nil
}

func prefsCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "prefs", Short: "Your preferences: sub-agents, model choice, job budget, notifications",
		Long: `prefs shows and changes your preferences. A job records the preferences it started under,
so a change applies to the jobs started after it. An administrator reads and changes
anyone's with --user.`}
	var user string
	get := &cobra.Command{
		Use:   "get",
		Short: "Show your preferences (the defaults for what you never set)",
		Example: `  thefold prefs get
  thefold prefs get -o json | jq '.job_budget'`,
		Args: cobra.NoArgs,
		RunE: g.withClient(func(cmd *cobra.Command, _ []string, c *client.Client) error {
			resp, err := c.Preferences().GetPreferences(cmd.Context(), &agentv1.GetPreferencesRequest{UserId: user})
			if err != nil {
				return err
			}
			return g.print(resp.Preferences, func(w *tabwriter.Writer) { printPrefs(w, resp.Preferences) })
		}),
	}
	get.Flags().StringVar(&user, "user", "", "another user's (administrators)")
	var (
		subAgents, mode, merge, cost string
		models, notify               []string
		tokens                       int64
		wall                         time.Duration
		req                          *agentv1.UpdatePreferencesRequest
	)
	set := &cobra.Command{
		Use:   "set",
		Short: "Change the preferences the flags name (the others stay as they are)",
		Long: `set changes only what its flags name. --model PURPOSE=MODEL_ID (repeatable) sets the
registry model used for a purpose instead of automatic selection — planning, coding,
review or chat — and PURPOSE= clears it. --job-max-* are the caps of a job whose start
gives none (0: the server's default). --notify MOMENT=on|off (repeatable) says which of a
job's moments reach your Slack and Discord integrations — review_ready, job_completed,
job_failed, clarification; the conversation that started a job hears of all of them.`,
		Example: `  thefold prefs set --sub-agents on --merge ai_merge
  thefold prefs set --budget-mode aggressive_save --job-max-cost 2.50 --job-max-wall-time 45m
  thefold prefs set --model coding=claude-sonnet-4-5 --model review=
  thefold prefs set --notify review_ready=off --notify job_failed=on -o json`,
		Args: cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			req, err = prefsUpdate(cmd.Flags().Changed, user, subAgents, mode, merge, models, notify, tokens, cost, wall)
			return err
		},
		RunE: g.withClient(func(cmd *cobra.Command, _ []string, c *client.Client) error {
			resp, err := c.Preferences().UpdatePreferences(cmd.Context(), req)
			if err != nil {
				return err
			}
			return g.print(resp.Preferences, func(w *tabwriter.Writer) { printPrefs(w, resp.Preferences) })
		}),
	}
	set.Flags().StringVar(&user, "user", "", "another user's (administrators)")
	set.Flags().StringVar(&subAgents, "sub-agents", "", "on or off: sub-agents for complex tasks (complexity 5 and above)")
	set.Flags().StringVar(&mode, "budget-mode", "", "balanced, quality_first or aggressive_save")
	set.Flags().StringVar(&merge, "merge", "", "how sub-agents' outputs are merged: concatenate or ai_merge")
	set.Flags().StringArrayVar(&models, "model", nil, "PURPOSE=MODEL_ID, PURPOSE one of "+strings.Join(modelPurposes, ", ")+" (repeatable; PURPOSE= clears)")
	set.Flags().Int64Var(&tokens, "job-max-tokens", 0, "a job's token cap (0: the server's default)")
	set.Flags().StringVar(&cost, "job-max-cost", "", "a job's cost cap in dollars, e.g. 2.50 (0: the server's default)")
	set.Flags().DurationVar(&wall, "job-max-wall-time", 0, "a job's wall-time cap, e.g. 45m (0: the server's default)")
	set.Flags().StringArrayVar(&notify, "notify", nil, "MOMENT=on|off, MOMENT one of "+strings.Join(notifyMoments, ", ")+" (repeatable)")
	cmd.AddCommand(get, set)
	return cmd
}

// printPrefs writes the preferences a line per setting.
func printPrefs(w io.Writer, p *agentv1.Preferences) {
	fmt.Fprintf(w, "user\t%s\nsub-agents\t%s\nmerge\t%s\nbudget mode\t%s\n", p.UserId, onOff(p.SubAgentsEnabled),
		orElse(enumName(p.SubAgentMerge, "MERGE_STRATEGY_"), "concatenate"), orElse(enumName(p.BudgetMode, "BUDGET_MODE_"), "balanced"))
	for _, purpose := range modelPurposes {
		fmt.Fprintf(w, "model %s\t%s\n", purpose, orElse(p.DefaultModels[purpose], "(automatic)"))
	}
	b := p.GetJobBudget()
	tokens, cost, wall := "(server default)", "(server default)", "(server default)"
	if b.GetMaxTokens() > 0 {
		tokens = strconv.FormatInt(b.GetMaxTokens(), 10)
	}
	if b.GetMaxCostMicros() > 0 {
		cost = dollars(b.GetMaxCostMicros())
	}
	if d := b.GetMaxWallTime().AsDuration(); d > 0 {
		wall = d.String()
	}
	fmt.Fprintf(w, "job max tokens\t%s\njob max cost\t%s\njob max wall time\t%s\n", tokens, cost, wall)
	n := p.GetNotifications()
	for _, m := range []struct {
		name string
		on   bool
	}{{"review_ready", n.GetReviewReady()}, {"job_completed", n.GetJobCompleted()}, {"job_failed", n.GetJobFailed()}, {"clarification", n.GetClarification()}} {
		fmt.Fprintf(w, "notify %s\t%s\n", m.name, onOff(m.on))
	}
	if t := p.GetUpdateTime(); t != nil {
		fmt.Fprintf(w, "updated\t%s\n", t.AsTime().Local().Format(time.DateTime))
	}
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
