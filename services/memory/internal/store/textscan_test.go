package store

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/thefold/thefold/pkg/db/dbtest"
	memoryv1 "github.com/thefold/thefold/pkg/gen/thefold/memory/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"

	"github.com/thefold/thefold/services/memory/internal/tsindex"
	"github.com/thefold/thefold/services/memory/migrations"
)

// paragraphs is n paragraphs of real prose of at least 15 words: the package
// documentation of Go's standard library (the doc.go files under GOROOT), in path order.
func paragraphs(t *testing.T, n int) []string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	var files []string
	err = filepath.WalkDir(filepath.Join(strings.TrimSpace(string(out)), "src"), func(path string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == "doc.go" && !strings.Contains(path, "testdata") {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	var paras []string
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		var cur []string
		flush := func() {
			if p := strings.Join(cur, " "); len(strings.Fields(p)) >= 15 && len(paras) < n {
				paras = append(paras, p)
			}
			cur = nil
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			text, ok := strings.CutPrefix(line, "//")
			if !ok || strings.TrimSpace(text) == "" {
				flush()
				continue
			}
			cur = append(cur, strings.TrimSpace(text))
		}
		flush()
		_ = fh.Close()
		if len(paras) == n {
			return paras
		}
	}
	t.Fatalf("only %d paragraphs of documentation under GOROOT, want %d", len(paras), n)
	return nil
}

// insertText stores owner's memory of content (its full-text vector made of content
// alone) in repo with type typ and a random vector, and returns its id.
func insertText(t *testing.T, s *Store, owner, repo string, typ typev1.MemoryType, content string, rng *rand.Rand) string {
	t.Helper()
	m := &memoryv1.Memory{OwnerId: owner, Repo: repo, Type: typ, Content: content, ContentHash: fmt.Sprintf("%x", content),
		TrustLevel: memoryv1.MemoryTrustLevel_MEMORY_TRUST_LEVEL_USER, Importance: 0.5}
	row, _, err := s.Insert(context.Background(), NewMemory{Memory: m, Vector: Vector{Model: "test@1", Values: scanVector(rng)}, SearchText: content})
	if err != nil {
		t.Fatal(err)
	}
	return row.GetId()
}

// textIndex is the owner's in-process full-text index.
func textIndex(s *Store, owner string) *tsindex.Index {
	s.scan.mu.Lock()
	ov := s.scan.owners[owner]
	s.scan.mu.Unlock()
	ov.mu.Lock()
	defer ov.mu.Unlock()
	return ov.text
}

// The in-process rank is PostgreSQL's ts_rank(search, every query lexeme ORed, 1|32), on
// real text and on vectors of every shape: weights, quotes and backslashes in lexemes,
// lexemes without positions, an empty vector, a word repeated past the 256 positions
// PostgreSQL keeps.
func TestRankIsPostgreSQLs(t *testing.T) {
	t.Parallel()
	s, rng := scanStore(t, 11)
	ctx := context.Background()
	for i, p := range paragraphs(t, 300) {
		insertText(t, s, "alice", "acme/api", typev1.MemoryType_MEMORY_TYPE_GENERAL, fmt.Sprint(p, " ", i), rng)
	}
	spam := insertText(t, s, "alice", "acme/api", typev1.MemoryType_MEMORY_TYPE_GENERAL, strings.Repeat("spam ", 300)+"eggs", rng)
	insertText(t, s, "alice", "acme/api", typev1.MemoryType_MEMORY_TYPE_GENERAL, "error error handling error: the pool pool returns an error", rng)
	for _, tsv := range []string{
		`'it''s':1A,2 'a\\b':3B 'bare' 'weight':4C,5,6A 'pool':7B,9`,
		`'weight' 'pool' 'error'`, // no positions
		``,                        // empty
		`'error':1A,2A,3A,4B,5C 'handl':6 'return':7,8,9,10,11,12,13,14,15,16,17,18,19,20`,
	} {
		id := insertText(t, s, "alice", "acme/api", typev1.MemoryType_MEMORY_TYPE_GENERAL, "placeholder "+tsv, rng)
		if _, err := s.pool.Exec(ctx, "UPDATE memories SET search = $1::tsvector WHERE id = $2", tsv, id); err != nil {
			t.Fatal(err)
		}
	}
	// PostgreSQL keeps the first 255 positions of a lexeme (fewer than its MAXNUMPOS, 256),
	// and so does the parsed vector.
	var spamText string
	if err := s.pool.QueryRow(ctx, "SELECT search::text FROM memories WHERE id = $1", spam).Scan(&spamText); err != nil {
		t.Fatal(err)
	}
	if entries, _, err := tsindex.Parse(spamText); err != nil || len(entries) != 2 || len(entries[1].Weights) != 255 {
		t.Fatalf("the spam memory's vector: %v (%v): %s", entries, err, spamText)
	}
	if err := s.LoadScan(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	text := textIndex(s, "alice")
	same, compared := 0, 0
	for _, words := range []string{
		"error handling returns an error",
		"error error error pool",
		"spam",
		"spam eggs weight",
		"bare weight pool",
		"package provides functions for formatted input and output",
		"the of and", // stop words only: no lexeme, every rank 0
		"interface reader io writer buffer bytes string convert time zone format parse template escape",
		"goroutine", "xyzzy unknownword",
	} {
		lexemes, err := s.lexemes(ctx, words)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := s.pool.Query(ctx, `SELECT id::text, ts_rank(search, `+orQuery("$1")+`, 1|32) FROM memories WHERE owner_id = 'alice'`, words)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		var want []float32
		var id string
		var rank float32
		if _, err := pgx.ForEachRow(rows, []any{&id, &rank}, func() error {
			ids, want = append(ids, id), append(want, rank)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		got := text.Ranks(ids, lexemes)
		positive := 0
		for i := range ids {
			if d := math.Abs(float64(got[i]) - float64(want[i])); d > 1e-6 {
				t.Errorf("%q, memory %s: rank %v in the process, %v by PostgreSQL", words, ids[i], got[i], want[i])
			}
			if got[i] == want[i] {
				same++
			}
			if want[i] > 0 {
				positive++
			}
			compared++
		}
		if (positive == 0) != (words == "the of and" || words == "xyzzy unknownword") {
			t.Errorf("%q: %d memories of positive rank", words, positive)
		}
	}
	t.Logf("%d of %d ranks the same to the bit", same, compared)
}

// textIDs is the ids the text ranking found, best first, with their text ranks; and every
// candidate's text rank, by id.
func textIDs(t *testing.T, s *Store, q SearchQuery) ([]string, map[string]float64) {
	t.Helper()
	got, err := s.Search(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, func(a, b *Candidate) int { return a.TextRank - b.TextRank })
	var ids []string
	ranks := map[string]float64{}
	for _, c := range got {
		if c.TextRank > 0 {
			ids = append(ids, c.GetId())
		}
		ranks[c.GetId()] = c.Text
	}
	return ids, ranks
}

// sameText fails the test unless q finds the same by the in-process text ranking as by
// PostgreSQL's, with the same text ranks, and returns what it found.
func sameText(t *testing.T, s *Store, what string, q SearchQuery) []string {
	t.Helper()
	db := q
	db.TextInDB = true
	got, gotRanks := textIDs(t, s, q)
	want, wantRanks := textIDs(t, s, db)
	if !slices.Equal(got, want) {
		t.Fatalf("%s: the in-process text ranking found %v, PostgreSQL's %v", what, got, want)
	}
	for id, r := range wantRanks {
		if math.Abs(gotRanks[id]-r) > 1e-6 {
			t.Errorf("%s: memory %s has text rank %v in the process, %v by PostgreSQL", what, id, gotRanks[id], r)
		}
	}
	return got
}

// Ranked in the process, a search finds what PostgreSQL's ranking finds, with the same
// scores, with and without the filters (repository, type), and the vector ranking's hits
// get the same text ranks.
func TestTextScanIsTheSQLRanking(t *testing.T) {
	t.Parallel()
	s, rng := scanStore(t, 13)
	repos := map[string]string{}
	types := map[string]typev1.MemoryType{}
	for i, p := range paragraphs(t, 300) {
		repo, typ := "acme/api", typev1.MemoryType_MEMORY_TYPE_GENERAL
		if i%3 == 0 {
			repo = "acme/web"
		}
		if i%4 == 0 {
			typ = typev1.MemoryType_MEMORY_TYPE_DECISION
		}
		id := insertText(t, s, "alice", repo, typ, p, rng)
		repos[id], types[id] = repo, typ
	}
	insertText(t, s, "bob", "acme/api", typev1.MemoryType_MEMORY_TYPE_GENERAL, paragraphs(t, 1)[0], rng) // not alice's
	if err := s.LoadScan(context.Background(), "alice"); err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		name   string
		filter Filter
		ok     func(id string) bool
	}{
		{"any repository", Filter{AnyRepo: true}, func(id string) bool { return repos[id] != "" }},
		{"acme/web", Filter{Repo: "acme/web"}, func(id string) bool { return repos[id] == "acme/web" }},
		{"decisions", Filter{AnyRepo: true, Types: []typev1.MemoryType{typev1.MemoryType_MEMORY_TYPE_DECISION}},
			func(id string) bool { return types[id] == typev1.MemoryType_MEMORY_TYPE_DECISION }},
	} {
		for _, words := range []string{
			"package provides functions for formatted input and output",
			"error returned when the reader reaches end of file",
			"goroutine channel",
			"the of and",
			"http server handler request",
		} {
			// A pool large enough that PostgreSQL ranks every matching memory too (its
			// pick of the rows to rank otherwise goes by estimates and a LIMIT).
			q := SearchQuery{Owner: "alice", Filter: f.filter, Vector: Vector{Model: "test@1", Values: scanVector(rng)}, Words: words, K: 10, TextPool: 100_000}
			found := sameText(t, s, f.name+", "+words, q)
			if len(found) == 0 && words != "the of and" && f.filter.AnyRepo && len(f.filter.Types) == 0 {
				t.Errorf("%s, %q: nothing found", f.name, words)
			}
			for _, id := range found {
				if !f.ok(id) {
					t.Errorf("%s, %q: found %s, which the filter leaves out", f.name, words, id)
				}
			}
		}
	}

	// What answered was the in-process ranking: a term only the index has is found.
	ids, _ := textIDs(t, s, SearchQuery{Owner: "alice", Filter: Filter{AnyRepo: true}, Vector: Vector{Model: "test@1", Values: scanVector(rng)}, Words: "provides", K: 1})
	if len(ids) != 1 {
		t.Fatalf("found %v", ids)
	}
	if err := textIndex(s, "alice").Put(ids[0], `'zzyzx':1`); err != nil {
		t.Fatal(err)
	}
	q := SearchQuery{Owner: "alice", Filter: Filter{AnyRepo: true}, Vector: Vector{Model: "test@1", Values: scanVector(rng)}, Words: "zzyzx", K: 1}
	if got, _ := textIDs(t, s, q); !slices.Equal(got, ids) {
		t.Fatalf("the index's own term found %v, want %v", got, ids)
	}
	q.TextInDB = true
	if got, _ := textIDs(t, s, q); len(got) != 0 {
		t.Fatalf("PostgreSQL found %v by a term it does not have", got)
	}
}

// A filter that leaves fewer than k of the in-process ranking's best makes PostgreSQL rank
// instead, which picks the rows the filter lets through.
func TestTextScanWithASelectiveFilterRanksInTheDatabase(t *testing.T) {
	t.Parallel()
	s, rng := scanStore(t, 17)
	var rare []string
	for i := range 60 {
		insertText(t, s, "alice", "acme/api", typev1.MemoryType_MEMORY_TYPE_GENERAL, fmt.Sprintf("frobnicate the frobnicate widget %d", i), rng)
		if i%20 == 0 {
			// Ranked below every acme/api memory: one frobnicate among many words.
			rare = append(rare, insertText(t, s, "alice", "acme/rare", typev1.MemoryType_MEMORY_TYPE_GENERAL,
				fmt.Sprintf("frobnicate once, among a great many other words about unrelated matters %d", i), rng))
		}
	}
	if err := s.LoadScan(context.Background(), "alice"); err != nil {
		t.Fatal(err)
	}
	q := SearchQuery{Owner: "alice", Filter: Filter{Repo: "acme/rare"}, Vector: Vector{Model: "test@1", Values: scanVector(rng)}, Words: "frobnicate", K: 2}
	got := sameText(t, s, "acme/rare", q)
	if len(got) != 2 || !slices.Contains(rare, got[0]) || !slices.Contains(rare, got[1]) {
		t.Fatalf("found %v, want two of %v", got, rare)
	}
}

// The in-process text ranking sees at once what another replica stores, changes and
// deletes, also when only the full-text vector changes, and after a pruned tombstone.
func TestTextScanFollowsEveryReplicasChanges(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDatabase(t, "memory", migrations.FS, DBOptions()...)
	writer, reader := New(pool), New(pool)
	reader.EnableScan(1000)
	rng := rand.New(rand.NewPCG(19, 20))
	ctx := context.Background()
	var ids []string
	for i, p := range paragraphs(t, 50) {
		ids = append(ids, insertText(t, writer, "alice", "acme/api", typev1.MemoryType_MEMORY_TYPE_GENERAL, fmt.Sprint(p, " marker", i), rng))
	}
	if err := reader.LoadScan(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	find := func(what, words string) []string {
		t.Helper()
		return sameText(t, reader, what, SearchQuery{Owner: "alice", Filter: Filter{AnyRepo: true},
			Vector: Vector{Model: "test@1", Values: scanVector(rng)}, Words: words, K: 5})
	}
	if got := find("loaded", "marker7"); !slices.Equal(got, ids[7:8]) {
		t.Fatalf("loaded: found %v, want %v", got, ids[7:8])
	}

	// New content (as UpdateMemory changes it: a new embedding and full-text vector).
	content := "quagga okapi narwhal"
	if _, err := writer.Update(ctx, "alice", ids[3], Update{Content: &content, Hash: "new hash",
		Vector: &Vector{Model: "test@1", Values: scanVector(rng)}, SearchText: content}); err != nil {
		t.Fatal(err)
	}
	if got := find("after an update", "okapi"); !slices.Equal(got, ids[3:4]) {
		t.Fatalf("after an update: found %v, want %v", got, ids[3:4])
	}
	if got := find("after an update, the old words", "marker3"); len(got) != 0 {
		t.Fatalf("after an update, the old content is still found: %v", got)
	}
	// Only the full-text vector changed.
	if _, err := pool.Exec(ctx, "UPDATE memories SET search = to_tsvector('english', 'axolotl') WHERE id = $1", ids[4]); err != nil {
		t.Fatal(err)
	}
	if got := find("after a change of the full-text vector alone", "axolotl"); !slices.Equal(got, ids[4:5]) {
		t.Fatalf("after a change of the full-text vector alone: found %v, want %v", got, ids[4:5])
	}
	// Stored and deleted by the other replica.
	added := insertText(t, writer, "alice", "acme/api", typev1.MemoryType_MEMORY_TYPE_GENERAL, "a brand new capybara", rng)
	if got := find("after a store", "capybara"); !slices.Equal(got, []string{added}) {
		t.Fatalf("after a store: found %v, want %v", got, added)
	}
	if err := writer.Delete(ctx, "alice", ids[7]); err != nil {
		t.Fatal(err)
	}
	if got := find("after a delete", "marker7"); len(got) != 0 {
		t.Fatalf("after a delete: found %v", got)
	}
	// A delete whose tombstone was pruned before the reader caught up: read again.
	if err := writer.Delete(ctx, "alice", ids[8]); err != nil {
		t.Fatal(err)
	}
	if _, err := writer.PruneTombstones(ctx, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got := find("after a pruned delete", "marker8"); len(got) != 0 {
		t.Fatalf("after a pruned delete: found %v", got)
	}
	if n := textIndex(reader, "alice").Len(); n != 49 {
		t.Fatalf("the reader's index holds %d memories, want 49", n)
	}
}
