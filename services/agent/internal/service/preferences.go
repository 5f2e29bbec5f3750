package service

import (
	"context"
	"slices"
	"strings"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/errs"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/validate"

	"github.com/thefold/thefold/services/agent/internal/store"
)

// maxUserID bounds a user id named in a request.
const maxUserID = 200

// preferencesServer is the PreferencesService side of the server.
type preferencesServer struct {
	agentv1.UnimplementedPreferencesServiceServer
	s *Server
}

// Preferences is the PreferencesService side of the server: each person's preferences,
// which the jobs they start record (StartTask) and their notices follow.
func (s *Server) Preferences() agentv1.PreferencesServiceServer { return &preferencesServer{s: s} }

var _ agentv1.PreferencesServiceServer = (*preferencesServer)(nil)

// whose is the user whose preferences a request names in field: the caller's when it names
// none (or the caller); another user's only for an admin, NOT_FOUND for anyone else, as
// for anything of someone else's.
func whose(ctx context.Context, field, user string) (string, error) {
	p, err := auth.MustFromContext(ctx)
	if err != nil {
		return "", err
	}
	if user == "" || user == p.UserID {
		return p.UserID, nil
	}
	if len(user) > maxUserID || !validate.PrintableASCII(user, false) {
		return "", errs.Invalid(field, "not a user id")
	}
	if !p.HasRole(auth.RoleAdmin) {
		return "", errs.NotFound("preferences of user", user)
	}
	return user, nil
}

// GetPreferences returns the preferences, the defaults for what was never set.
func (x *preferencesServer) GetPreferences(ctx context.Context, req *agentv1.GetPreferencesRequest) (*agentv1.GetPreferencesResponse, error) {
	user, err := whose(ctx, "user_id", req.GetUserId())
	if err != nil {
		return nil, err
	}
	p, err := x.s.store.GetPreferences(ctx, user)
	if err != nil {
		return nil, err
	}
	return &agentv1.GetPreferencesResponse{Preferences: p}, nil
}

// allPreferences are the paths an empty update_mask means: every field (the output-only
// ones aside).
var allPreferences = []string{"sub_agents_enabled", "sub_agent_merge", "budget_mode", "default_models", "job_budget", "notifications"}

// UpdatePreferences changes the fields update_mask names (every field when it names none)
// and returns the preferences as they now are.
func (x *preferencesServer) UpdatePreferences(ctx context.Context, req *agentv1.UpdatePreferencesRequest) (*agentv1.UpdatePreferencesResponse, error) {
	in := req.GetPreferences()
	if in == nil {
		return nil, errs.Invalid("preferences", "required")
	}
	user, err := whose(ctx, "preferences.user_id", in.GetUserId())
	if err != nil {
		return nil, err
	}
	paths := req.GetUpdateMask().GetPaths()
	if len(paths) == 0 {
		paths = allPreferences
	}
	for i, p := range paths {
		if !slices.Contains(store.PreferencesPaths, p) {
			return nil, errs.Invalid("update_mask", "paths[%d] %q is not a field of Preferences that can be updated; updatable: %s",
				i, validate.Truncate(p, 64), strings.Join(store.PreferencesPaths, ", "))
		}
	}
	if err := checkPreferences(in, paths); err != nil {
		return nil, err
	}
	// Output-only fields (user_id, update_time) are not among the paths: ignored.
	p, err := x.s.store.UpdatePreferences(ctx, user, in, paths)
	if err != nil {
		return nil, err
	}
	return &agentv1.UpdatePreferencesResponse{Preferences: p}, nil
}

// checkPreferences checks the values of in that paths name (the others are not stored).
func checkPreferences(in *agentv1.Preferences, paths []string) error {
	const prefix = "preferences."
	for _, path := range paths {
		field, sub, _ := strings.Cut(path, ".")
		var err error
		switch field {
		case "sub_agent_merge":
			err = validate.Enum(prefix+path, in.GetSubAgentMerge(), true)
		case "budget_mode":
			err = validate.Enum(prefix+path, in.GetBudgetMode(), true)
		case "default_models":
			err = checkDefaultModels(prefix+field, in.GetDefaultModels(), sub)
		case "job_budget":
			b := in.GetJobBudget()
			switch sub {
			case "max_tokens":
				b = &typev1.Budget{MaxTokens: b.GetMaxTokens()}
			case "max_cost_micros":
				b = &typev1.Budget{MaxCostMicros: b.GetMaxCostMicros()}
			case "max_wall_time":
				b = &typev1.Budget{MaxWallTime: b.GetMaxWallTime()}
			}
			err = checkBudget(prefix+field, b)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// checkDefaultModels checks the default_models entries given (only purpose's when it is
// set): each key a purpose, each value empty (the entry is removed) or a registry model id.
func checkDefaultModels(field string, models map[string]string, purpose string) error {
	keys := []string{purpose}
	if purpose == "" {
		keys = keys[:0]
		for k := range models {
			if !slices.Contains(store.ModelPurposes, k) {
				return errs.Invalid(field, "%q is not a purpose; the purposes are %s", validate.Truncate(k, 64), strings.Join(store.ModelPurposes, ", "))
			}
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		v := models[k]
		switch {
		case v == "":
			continue
		case len(v) > maxModel:
			return errs.Invalid(field+"."+k, "a model id has at most %d characters", maxModel)
		case strings.TrimSpace(v) == "":
			return errs.Invalid(field+"."+k, "blank: set a model id, or leave it empty to remove the entry")
		case !validate.PrintableASCII(v, false):
			return errs.Invalid(field+"."+k, "%q is not a model id (printable ASCII without spaces)", validate.Truncate(v, 64))
		}
	}
	return nil
}
