package app

import (
	"strings"
	"testing"
	"time"

	"github.com/thefold/thefold/pkg/events"
)

func TestConfigRefusesSettingsThatStopEveryBuild(t *testing.T) {
	good := Config{MaxBuilds: 4, LeaseExpiry: 15 * time.Second, ContextBudget: 60000, MaxFixRounds: 3, MaxIterations: 3,
		MaxWatches: 10, MaxWatchesPerUser: 2, WatchHeartbeat: time.Second, CallTimeout: time.Minute, ValidateTimeout: time.Minute, Events: events.RetentionConfig{Every: time.Minute, MaxAge: time.Hour}}
	if err := good.Validate(); err != nil {
		t.Fatalf("good config: %v", err)
	}
	for name, c := range map[string]func(*Config){
		"THEFOLD_BUILDER_MAX_BUILDS":           func(c *Config) { c.MaxBuilds = 0 },
		"THEFOLD_BUILDER_LEASE_EXPIRY":         func(c *Config) { c.LeaseExpiry = time.Second },
		"THEFOLD_BUILDER_CONTEXT_BUDGET":       func(c *Config) { c.ContextBudget = -1 },
		"THEFOLD_BUILDER_MAX_FIX_ROUNDS":       func(c *Config) { c.MaxFixRounds = -1 },
		"THEFOLD_BUILDER_REFERENCE_BUDGET":     func(c *Config) { c.ReferenceBudget = -1 },
		"THEFOLD_BUILDER_WATCH_HEARTBEAT":      func(c *Config) { c.WatchHeartbeat = 0 },
		"THEFOLD_BUILDER_MAX_WATCHES_PER_USER": func(c *Config) { c.MaxWatchesPerUser = 0 },
	} {
		bad := good
		c(&bad)
		if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
