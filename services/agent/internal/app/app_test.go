package app

import (
	"strings"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	ok := Config{MaxJobs: 1, LeaseExpiry: 3e9, MaxAttempts: 5, InterveneAfter: 3, MaxTokens: 1, MaxCostMicros: 1, MaxWallTime: 1e9,
		ContextTokens: 1, MaxWatches: 1, MaxWatchesPerUser: 1, WatchHeartbeat: 1e9, CallTimeout: 1e9, ChatMaxRounds: 10,
		ChatContextTokens: 60000, WebhookBackoff: 1e9}
	ok.Events.Every, ok.Events.MaxAge = 3600e9, 3600e9
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	bad := ok
	bad.LeaseExpiry, bad.TasksPerHour = 1e9, -1
	if err := bad.Validate(); err == nil {
		t.Fatal("a 1s lease and a negative rate limit were accepted")
	}
	bad = ok
	bad.ChatMaxRounds, bad.ChatContextTokens = 0, 100
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "THEFOLD_AGENT_CHAT_MAX_ROUNDS") ||
		!strings.Contains(err.Error(), "THEFOLD_AGENT_CHAT_CONTEXT_TOKENS") {
		t.Fatalf("no chat rounds and a tiny chat context: %v", err)
	}
}
