package store

import (
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/thefold/thefold/pkg/db"
	"github.com/thefold/thefold/pkg/db/dbtest"

	"github.com/thefold/thefold/services/ai/migrations"
)

// migrationsBefore returns the ai migrations older than the file named first.
func migrationsBefore(t *testing.T, first string) fs.FS {
	t.Helper()
	out := fstest.MapFS{}
	entries, err := fs.ReadDir(migrations.FS, ".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".sql") && e.Name() < first {
			b, err := fs.ReadFile(migrations.FS, e.Name())
			if err != nil {
				t.Fatal(err)
			}
			out[e.Name()] = &fstest.MapFile{Data: b}
		}
	}
	return out
}

// The supports_reasoning migration also sets the providers' documented defaults on models an
// admin added before it, by their provider names, and leaves the rest off.
func TestReasoningMigrationDefaults(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, url := dbtest.NewDatabase(t, "ai", migrationsBefore(t, "00004_supports_reasoning.sql"))
	added := map[string]map[string]bool{
		"anthropic": {"claude-3-7-sonnet-20250219": true, "claude-opus-4-1-20250805": true, "claude-3-5-haiku-latest": false},
		"openai": {
			"o3": true, "o4-mini": true, "o1": true, "gpt-5": true, "gpt-5-mini": true,
			"o1-mini": false, "o1-preview": false, "gpt-5-chat-latest": false, "gpt-4o-2024-08-06": false, "omni-moderation": false,
		},
		"gemini": {
			"gemini-2.5-flash-lite": true, "models/gemini-2.5-pro": true, "gemini-3-pro-preview": true,
			"gemini-2.5-flash-image": false, "gemini-2.5-flash-preview-tts": false, "gemini-1.5-pro": false,
		},
		// An OpenAI-compatible server's model is off whatever its name: which parameters the
		// server takes is the admin's to say.
		"moonshot": {"gpt-5-proxy": false},
	}
	for provider, models := range added {
		for name := range models {
			if _, err := pool.Exec(ctx, `INSERT INTO models (provider_id, name, tier, tags)
				SELECT id, $2, 3, '{chat}' FROM providers WHERE name = $1`, provider, name); err != nil {
				t.Fatalf("insert %s/%s: %v", provider, name, err)
			}
		}
	}
	if err := db.Migrate(ctx, url, "ai", migrations.FS); err != nil {
		t.Fatal(err)
	}
	cat, err := New(pool).Catalogue(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, p := range cat {
		for _, m := range p.Models {
			want, ok := added[p.Name][m.Name]
			if !ok {
				continue // seeded: TestSeedCatalogue checks those
			}
			seen++
			if m.SupportsReasoning != want {
				t.Errorf("%s/%s supports_reasoning = %v, want %v", p.Name, m.Name, m.SupportsReasoning, want)
			}
		}
	}
	if seen != 20 {
		t.Errorf("found %d of the 20 added models", seen)
	}
}
