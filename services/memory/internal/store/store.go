// Package store keeps the memory service's state in its PostgreSQL schema (pgvector):
// memories with their embeddings and full-text vectors, code patterns, and the integrity
// failures found on read. Every query is scoped by owner; another owner's memory is
// errs.ErrNotFound.
package store

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgvector/pgvector-go"
	pgxvec "github.com/pgvector/pgvector-go/pgx"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/db"
	"github.com/thefold/thefold/pkg/errs"
	memoryv1 "github.com/thefold/thefold/pkg/gen/thefold/memory/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// Store is the memory schema.
type Store struct {
	pool *pgxpool.Pool

	mu      sync.Mutex
	indexed map[string]bool
	// building holds one lock per index name EnsureIndex may build: this process's
	// callers build it one at a time (two concurrent builds of one table deadlock).
	building sync.Map // index name → *sync.Mutex
	// legacyUntil: pairs (by indexName) whose searches walk the full-precision index, until
	// when (walkHalf).
	legacyUntil map[string]time.Time
	stats       map[string]*termStats // by table
	// lexCache holds the lexemes of query words (see lexemes).
	lexCache map[string][]string
	// scan is the in-process vector ranking of memories, nil when off (EnableScan).
	scan *scanState
	// accesses are the access recordings in flight (RecordAccessLater): each holds a read
	// lock until it is written, and reads of access counts take the write lock for a
	// moment first (accessesLanded), so a replica reads its own recordings. accessSlots
	// bounds them; beyond it a recording is written at once.
	accesses    sync.RWMutex
	accessSlots chan struct{}
}

// New returns a store over pool, whose search_path is the memory schema.
func New(pool *pgxpool.Pool) *Store {
	return &Store{pool: pool, indexed: map[string]bool{}, legacyUntil: map[string]time.Time{}, stats: map[string]*termStats{}, lexCache: map[string][]string{},
		accessSlots: make(chan struct{}, maxAccessesInFlight)}
}

// Type and trust names as stored.
var (
	typeNames = map[typev1.MemoryType]string{
		typev1.MemoryType_MEMORY_TYPE_GENERAL: "general", typev1.MemoryType_MEMORY_TYPE_SKILL: "skill",
		typev1.MemoryType_MEMORY_TYPE_TASK: "task", typev1.MemoryType_MEMORY_TYPE_SESSION: "session",
		typev1.MemoryType_MEMORY_TYPE_ERROR_PATTERN: "error_pattern", typev1.MemoryType_MEMORY_TYPE_DECISION: "decision",
		typev1.MemoryType_MEMORY_TYPE_CODE_PATTERN: "code_pattern", typev1.MemoryType_MEMORY_TYPE_STRATEGY: "strategy",
	}
	trustNames = map[memoryv1.MemoryTrustLevel]string{
		memoryv1.MemoryTrustLevel_MEMORY_TRUST_LEVEL_USER:   "user",
		memoryv1.MemoryTrustLevel_MEMORY_TRUST_LEVEL_AGENT:  "agent",
		memoryv1.MemoryTrustLevel_MEMORY_TRUST_LEVEL_SYSTEM: "system",
	}
)

// TypeName is a memory type as stored ("decision").
func TypeName(t typev1.MemoryType) string { return typeNames[t] }

func parseType(s string) typev1.MemoryType {
	for k, v := range typeNames {
		if v == s {
			return k
		}
	}
	return typev1.MemoryType_MEMORY_TYPE_UNSPECIFIED
}

func parseTrust(s string) memoryv1.MemoryTrustLevel {
	for k, v := range trustNames {
		if v == s {
			return k
		}
	}
	return memoryv1.MemoryTrustLevel_MEMORY_TRUST_LEVEL_UNSPECIFIED
}

// Vector is an embedding with the model that made it.
type Vector struct {
	Model  string
	Values []float32
}

// param is the vector as a query argument: pgvector-go's type, sent in pgvector's binary
// format (the pool's connections have its types registered: DBOptions).
func (v Vector) param() pgvector.Vector { return pgvector.NewVector(v.Values) }

// DBOptions are the options of the memory service's pool: pgvector's types registered on
// every connection, so vectors travel in their binary format both ways.
func DBOptions() []db.Option {
	return []db.Option{db.AfterConnect(pgxvec.RegisterTypes)}
}

// modelPattern is what a model name must look like to be written into SQL (index
// predicates need literals).
var modelPattern = regexp.MustCompile(`^[A-Za-z0-9._:/@-]{1,100}$`)

// CheckModel reports whether a model name can be stored.
func CheckModel(m string) error {
	if !modelPattern.MatchString(m) {
		return fmt.Errorf("embedding model %q: unusable name", m)
	}
	return nil
}

// indexName is the HNSW index of one (model, dimensions) pair: a graph of the vectors at
// half precision (halfvecExpr).
func indexName(table, model string, dims int) string {
	return legacyIndexName(table, model, dims) + "_h"
}

// legacyIndexName is the pair's HNSW index as it was built until 2026-11-28, over the
// vectors at full precision (embedding::vector(dims)). Searches walk it until the pair's
// half-precision index is built (BuildIndexes builds that and then drops this one).
func legacyIndexName(table, model string, dims int) string {
	h := fnv.New32a()
	h.Write([]byte(model))
	return fmt.Sprintf("%s_hnsw_%08x_%d", table, h.Sum32(), dims)
}

// halfvecExpr is the indexed expression of one size: the stored vector at half precision.
// The HNSW graph holds it and is walked by it, and the walk's candidates are ordered and
// scored at full precision (vectorQuery). Against a full-precision graph of the same
// parameters, on the latency benchmark's 100k memories (2026-11-28, the two walked in turns):
// the same recall@10 at every ef_search, each walk about 10% faster, the index half the size
// and built in half the time; and it indexes vectors of up to 4,000 dimensions, where a
// full-precision HNSW index stops at 2,000 (a 3,072-dimension model's could not be indexed).
// vecPred is the partial index predicate.
func halfvecExpr(dims int) string { return fmt.Sprintf("(embedding::halfvec(%d))", dims) }
func vecPred(model string, dims int) string {
	return fmt.Sprintf("embedding_model = '%s' AND embedding_dims = %d", model, dims)
}

// EnsureIndex makes the HNSW index of a (model, dimensions) pair on table (memories or
// code_patterns) unless this process knows it is there, valid.
//
// Why this DDL is here and not with the migrations: pgvector's HNSW indexes a column of one
// fixed dimension, while the embedding column holds vectors of whatever model the operator
// configures (the built-in local embedder, or a provider's model of 768, 1536 or 3072
// dimensions), learned only at run time. So each (model, dimensions) pair gets a partial
// index over the expression embedding::halfvec(dims), restricted to rows of that pair —
// exactly what searches of that model walk and filter on (halfvecExpr, vecPred) — created
// the first time a vector of the pair is stored. The name hashes the model so any model name yields one
// index.
//
// An index in the catalog but not valid is being built (after a re-embedding's switch, or
// by another replica) or was left by a build that failed: EnsureIndex leaves it to its
// builder or to the re-embedding job (BuildIndexes), which may take minutes, and does not
// remember it as built. Only a pair with no index at all is built here, concurrently (see
// index.go): normally a new pair, with no rows yet. Several replicas may race: all but one
// wait for that one's build or, when PostgreSQL ends one of two builds of the table as a
// deadlock (a concurrent build waits for every older snapshot, the other build's too),
// leave it to the other build, or to BuildIndexes when the ended one left an invalid index.
// Within one process the builds of an index take turns: concurrent StoreMemory calls of a
// new pair failed with that deadlock.
func (s *Store) EnsureIndex(ctx context.Context, table, model string, dims int) error {
	if err := CheckModel(model); err != nil {
		return err
	}
	name := indexName(table, model, dims)
	if s.isIndexed(name) {
		return nil
	}
	lock, _ := s.building.LoadOrStore(name, &sync.Mutex{})
	lock.(*sync.Mutex).Lock()
	defer lock.(*sync.Mutex).Unlock()
	if s.isIndexed(name) { // built while this call waited its turn
		return nil
	}
	st, err := s.indexState(ctx, name)
	if err != nil || st.exists {
		if st.valid {
			s.remember(name)
		}
		return err
	}
	// A pair indexed before half-precision indexes (legacyIndexName) has its rows already:
	// its new index is BuildIndexes' work, in the background, not a request's.
	if legacy, err := s.indexState(ctx, legacyIndexName(table, model, dims)); err != nil || legacy.exists {
		return err
	}
	_, err = s.pool.Exec(ctx, createIndexSQL(table, Pair{Model: model, Dims: dims}))
	// Two processes racing to create it: one of them fails with one of these.
	if err != nil && !db.IsUniqueViolation(err) && !db.IsDuplicateTable(err) && !db.IsDeadlock(err) {
		return fmt.Errorf("store: index for %s/%d: %w", model, dims, err)
	}
	if st, err = s.indexState(ctx, name); err == nil && st.valid {
		s.remember(name)
	}
	return err
}

// Row is a stored memory: the contract's message and what only the service sees.
type Row struct {
	*memoryv1.Memory
	// HashOK is false when content no longer matches content_hash.
	HashOK bool
}

const memoryColumns = `m.id::text, m.owner_id, m.repo, m.memory_type, m.category, m.content, m.summary, m.content_hash,
	m.tags, m.trust_level, m.importance, m.embedding_model,
	coalesce((SELECT a.access_count FROM memory_access a WHERE a.memory_id = m.id), 0),
	(SELECT a.last_accessed_time FROM memory_access a WHERE a.memory_id = m.id), m.use_count,
	m.last_used_time, m.source_task_id, m.source_job_id, m.metadata, m.merged_from::text[], m.create_time,
	m.update_time, m.expire_time, encode(sha256(convert_to(m.content, 'UTF8')), 'hex') = m.content_hash,
	m.promoted_by, m.promote_time`

func scanMemory(row pgx.Row, extra ...any) (*Row, error) {
	m := &memoryv1.Memory{}
	var (
		typ, trust                   string
		lastAccess, lastUsed, expire *time.Time
		promoted                     *time.Time
		created, updated             time.Time
		metadata                     []byte
		hashOK                       bool
	)
	dest := []any{&m.Id, &m.OwnerId, &m.Repo, &typ, &m.Category, &m.Content, &m.Summary, &m.ContentHash,
		&m.Tags, &trust, &m.Importance, &m.EmbeddingModel, &m.AccessCount, &lastAccess, &m.UseCount,
		&lastUsed, &m.SourceTaskId, &m.SourceJobId, &metadata, &m.MergedFrom, &created, &updated, &expire, &hashOK,
		&m.PromotedBy, &promoted}
	if err := row.Scan(append(dest, extra...)...); err != nil {
		return nil, err
	}
	m.Type, m.TrustLevel = parseType(typ), parseTrust(trust)
	m.LastAccessedTime, m.LastUsedTime, m.ExpireTime, m.PromoteTime = ts(lastAccess), ts(lastUsed), ts(expire), ts(promoted)
	m.CreateTime, m.UpdateTime = timestamppb.New(created), timestamppb.New(updated)
	if len(metadata) > 0 {
		st := &structpb.Struct{}
		if err := st.UnmarshalJSON(metadata); err == nil {
			m.Metadata = st
		}
	}
	return &Row{Memory: m, HashOK: hashOK}, nil
}

// scoreColumns are what a search scores a candidate by (its type, importance, use and
// times: the decay and the usage boost), without its content: a search finds 2×K
// candidates and returns the best few, which SearchRows then reads whole.
const scoreColumns = `m.id::text, m.memory_type, m.importance, m.use_count, m.last_used_time, m.create_time, m.update_time`

// scanScored reads scoreColumns into a Row whose Memory has only those fields.
func scanScored(row pgx.Row, extra ...any) (*Row, error) {
	m := &memoryv1.Memory{}
	var (
		typ              string
		lastUsed         *time.Time
		created, updated time.Time
	)
	if err := row.Scan(append([]any{&m.Id, &typ, &m.Importance, &m.UseCount, &lastUsed, &created, &updated}, extra...)...); err != nil {
		return nil, err
	}
	m.Type, m.LastUsedTime = parseType(typ), ts(lastUsed)
	m.CreateTime, m.UpdateTime = timestamppb.New(created), timestamppb.New(updated)
	return &Row{Memory: m, HashOK: true}, nil
}

// SearchRows reads the owner's memories of ids whole (expired and deleted ones are
// missing from the map): the results a search chose among its candidates.
func (s *Store) SearchRows(ctx context.Context, owner string, ids []string) (map[string]*Row, error) {
	// Not waiting for the accesses in flight (accessesLanded): under load every search
	// would wait for the others'. A result's count may lag the searches of the last
	// milliseconds.
	// Primary-key lookups of the ids whatever the plan (a generic plan of id = ANY($1)
	// may walk the owner's index instead).
	rows, err := s.pool.Query(ctx, "SELECT "+memoryColumns+` FROM unnest($1::uuid[]) AS u(id) JOIN memories m ON m.id = u.id
		WHERE m.owner_id = $2 AND (m.expire_time IS NULL OR m.expire_time > now())`, ids, owner)
	if err != nil {
		return nil, fmt.Errorf("store: search rows: %w", err)
	}
	defer rows.Close()
	out := make(map[string]*Row, len(ids))
	for rows.Next() {
		r, err := scanMemory(rows)
		if err != nil {
			return nil, fmt.Errorf("store: search rows: %w", err)
		}
		out[r.GetId()] = r
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: search rows: %w", err)
	}
	return out, nil
}

func ts(t *time.Time) *timestamppb.Timestamp {
	if t == nil {
		return nil
	}
	return timestamppb.New(*t)
}

// NewMemory is a memory to insert.
type NewMemory struct {
	Memory *memoryv1.Memory
	Vector Vector
	// Next, while the memories are re-embedded for another model, is the memory's vector
	// of that model (kept in the side table until the switch).
	Next *Vector
	// SearchText is what the full-text vector is made of.
	SearchText string
	RequestID  string
}

func metadataJSON(m *memoryv1.Memory) ([]byte, error) {
	if m.GetMetadata() == nil {
		return nil, nil
	}
	return m.GetMetadata().MarshalJSON()
}

// Insert stores a memory. The same content of the same type in the same repository for the
// same owner, or the same request_id, returns the existing memory and dedup = true.
func (s *Store) Insert(ctx context.Context, nm NewMemory) (*memoryv1.Memory, bool, error) {
	m := nm.Memory
	if err := s.EnsureIndex(ctx, "memories", nm.Vector.Model, len(nm.Vector.Values)); err != nil {
		return nil, false, err
	}
	meta, err := metadataJSON(m)
	if err != nil {
		return nil, false, fmt.Errorf("metadata: %w", errs.ErrInvalid)
	}
	var reqID *string
	if nm.RequestID != "" {
		reqID = &nm.RequestID
	}
	var expire *time.Time
	if m.GetExpireTime() != nil {
		t := m.GetExpireTime().AsTime()
		expire = &t
	}
	var id string
	q := `INSERT INTO memories (owner_id, repo, memory_type, category, content, summary, content_hash,
			tags, trust_level, importance, embedding, embedding_model, embedding_dims, search, source_task_id, source_job_id,
			metadata, request_id, expire_time)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11::vector, $12, $13, to_tsvector('english', $14),
			$15, $16, $17, $18, $19)
		ON CONFLICT DO NOTHING RETURNING id`
	args := []any{m.GetOwnerId(), m.GetRepo(), typeNames[m.GetType()], m.GetCategory(), m.GetContent(), m.GetSummary(), m.GetContentHash(),
		nonNil(m.GetTags()), trustNames[m.GetTrustLevel()], m.GetImportance(), nm.Vector.param(), nm.Vector.Model,
		len(nm.Vector.Values), nm.SearchText, m.GetSourceTaskId(), m.GetSourceJobId(), meta, reqID, expire}
	q, args = withNext(q, args, "memory_next_embeddings", nm.Next)
	err = s.pool.QueryRow(ctx, q, args...).Scan(&id)
	dedup := false
	if errors.Is(err, pgx.ErrNoRows) {
		dedup = true
		// The request id first: a retry of this very call.
		if reqID != nil {
			err = s.pool.QueryRow(ctx, "SELECT id::text FROM memories WHERE owner_id = $1 AND request_id = $2", m.GetOwnerId(), nm.RequestID).Scan(&id)
		}
		if reqID == nil || errors.Is(err, pgx.ErrNoRows) {
			err = s.pool.QueryRow(ctx, `SELECT id::text FROM memories WHERE owner_id = $1 AND repo = $2 AND memory_type = $3
				AND content_hash = $4`, m.GetOwnerId(), m.GetRepo(), typeNames[m.GetType()], m.GetContentHash()).Scan(&id)
		}
	}
	if err != nil {
		return nil, false, fmt.Errorf("store: insert memory: %w", err)
	}
	row, err := s.Get(ctx, m.GetOwnerId(), id)
	if err != nil {
		return nil, false, err
	}
	return row.Memory, dedup, nil
}

// withNext makes q, an INSERT … RETURNING id of a row with args, also keep next (when
// set) in the side table nextTable, and return the id as text.
func withNext(q string, args []any, nextTable string, next *Vector) (string, []any) {
	if next == nil {
		return "WITH ins AS (" + q + ") SELECT id::text FROM ins", args
	}
	n := len(args)
	return fmt.Sprintf(`WITH ins AS (%s), nx AS (INSERT INTO %s (id, model, dims, embedding) SELECT id, $%d, $%d, $%d::vector FROM ins)
		SELECT id::text FROM ins`, q, nextTable, n+1, n+2, n+3), append(args, next.Model, len(next.Values), next.param())
}

// Get reads one of owner's memories (expired ones are not found).
func (s *Store) Get(ctx context.Context, owner, id string) (*Row, error) {
	s.accessesLanded()
	r, err := scanMemory(s.pool.QueryRow(ctx, "SELECT "+memoryColumns+` FROM memories m
		WHERE m.id = $1 AND m.owner_id = $2 AND (m.expire_time IS NULL OR m.expire_time > now())`, id, owner))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("memory %q: %w", id, errs.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get memory: %w", err)
	}
	return r, nil
}

// Filter selects memories.
type Filter struct {
	// Repo filters by repository when AnyRepo is false ("" is the memories of every
	// repository).
	Repo       string
	AnyRepo    bool
	Types      []typev1.MemoryType
	Tags       []string
	Trust      []memoryv1.MemoryTrustLevel
	Categories []string
	// StrategyTrust, when set, keeps strategy memories only at these trust levels (the
	// threshold of the agent's hints); memories of other types are not affected.
	StrategyTrust []memoryv1.MemoryTrustLevel
}

// conds adds the filter's conditions over alias m to c.
func (f Filter) conds(c *db.Conds) {
	c.Add("(m.expire_time IS NULL OR m.expire_time > now())")
	if !f.AnyRepo {
		c.Add("m.repo = $%d", f.Repo)
	}
	if len(f.Types) > 0 {
		names := make([]string, len(f.Types))
		for i, t := range f.Types {
			names[i] = typeNames[t]
		}
		c.Add("m.memory_type = ANY($%d)", names)
	}
	if len(f.Trust) > 0 {
		names := make([]string, len(f.Trust))
		for i, t := range f.Trust {
			names[i] = trustNames[t]
		}
		c.Add("m.trust_level = ANY($%d)", names)
	}
	if len(f.StrategyTrust) > 0 {
		names := make([]string, len(f.StrategyTrust))
		for i, t := range f.StrategyTrust {
			names[i] = trustNames[t]
		}
		c.Add("(m.memory_type <> 'strategy' OR m.trust_level = ANY($%d))", names)
	}
	if len(f.Tags) > 0 {
		c.Add("m.tags @> $%d", f.Tags)
	}
	if len(f.Categories) > 0 {
		c.Add("m.category = ANY($%d)", f.Categories)
	}
}

// List lists owner's memories, newest first, after the cursor (create time and id of the
// last memory of the previous page).
func (s *Store) List(ctx context.Context, owner string, f Filter, afterTime time.Time, afterID string, limit int) ([]*Row, error) {
	var c db.Conds
	c.Add("m.owner_id = $%d", owner)
	f.conds(&c)
	if afterID != "" {
		c.Add("(m.create_time, m.id) < ($%d, $%d::uuid)", afterTime, afterID)
	}
	s.accessesLanded()
	q := "SELECT " + memoryColumns + " FROM memories m" + c.Where() + " ORDER BY m.create_time DESC, m.id DESC LIMIT " + c.Arg(limit)
	rows, err := s.pool.Query(ctx, q, c.Args...)
	if err != nil {
		return nil, fmt.Errorf("store: list memories: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*Row, error) { return scanMemory(r) })
	if err != nil {
		return nil, fmt.Errorf("store: list memories: %w", err)
	}
	return out, nil
}

// Delete removes one of owner's memories.
func (s *Store) Delete(ctx context.Context, owner, id string) error {
	var tag pgconn.CommandTag
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) (err error) {
		if err := lockOwner(ctx, tx, owner); err != nil {
			return err
		}
		tag, err = tx.Exec(ctx, "DELETE FROM memories WHERE id = $1 AND owner_id = $2", id, owner)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: delete memory: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("memory %q: %w", id, errs.ErrNotFound)
	}
	return nil
}

// Update holds the new values of the fields that are set.
type Update struct {
	Content *string
	Hash    string
	// Vector and SearchText, when Vector is set, are the new embedding and full-text
	// source of the memory's text (its summary and content; either changed).
	Vector *Vector
	// Next is the new content's vector of the model the memories are being re-embedded
	// for, if they are.
	Next       *Vector
	SearchText string
	Summary    *string
	Tags       *[]string
	Category   *string
	Importance *float64
	ExpireTime **time.Time
	// Trust sets the trust level; PromotedBy is the person who raised it to USER (USER
	// only). Any other level clears who promoted it.
	Trust      *memoryv1.MemoryTrustLevel
	PromotedBy string
	// TrustFloor, when set, applies the update only while the memory's trust is one of
	// these levels: a service may lower trust, never raise it, also when the trust changes
	// under it. Otherwise the update is errs.ErrPermissionDenied.
	TrustFloor []memoryv1.MemoryTrustLevel
}

// Update changes one of owner's memories. New content that equals another memory's of the
// same type and repository is errs.ErrAlreadyExists.
func (s *Store) Update(ctx context.Context, owner, id string, u Update) (*memoryv1.Memory, error) {
	sets := []string{"update_time = now()"}
	// The SET values' placeholders follow the id ($1) and owner ($2).
	var c db.Conds
	c.Arg(id)
	c.Arg(owner)
	arg := c.Arg
	if u.Content != nil {
		sets = append(sets, "content = "+arg(*u.Content), "content_hash = "+arg(u.Hash))
	}
	if u.Vector != nil {
		sets = append(sets, "embedding = "+arg(u.Vector.param())+"::vector", "embedding_model = "+arg(u.Vector.Model),
			"embedding_dims = "+arg(len(u.Vector.Values)), "search = to_tsvector('english', "+arg(u.SearchText)+")")
		if err := s.EnsureIndex(ctx, "memories", u.Vector.Model, len(u.Vector.Values)); err != nil {
			return nil, err
		}
	}
	if u.Summary != nil {
		sets = append(sets, "summary = "+arg(*u.Summary))
	}
	if u.Tags != nil {
		sets = append(sets, "tags = "+arg(nonNil(*u.Tags)))
	}
	if u.Category != nil {
		sets = append(sets, "category = "+arg(*u.Category))
	}
	if u.Importance != nil {
		sets = append(sets, "importance = "+arg(*u.Importance))
	}
	if u.ExpireTime != nil {
		sets = append(sets, "expire_time = "+arg(*u.ExpireTime))
	}
	if u.Trust != nil {
		sets = append(sets, "trust_level = "+arg(trustNames[*u.Trust]))
		if *u.Trust == memoryv1.MemoryTrustLevel_MEMORY_TRUST_LEVEL_USER {
			// Who vouched first stays: a repeated promotion changes nothing.
			by := arg(u.PromotedBy)
			sets = append(sets, "promoted_by = CASE WHEN trust_level = 'user' THEN promoted_by ELSE "+by+" END",
				"promote_time = CASE WHEN trust_level = 'user' THEN promote_time ELSE now() END")
		} else {
			sets = append(sets, "promoted_by = ''", "promote_time = NULL")
		}
	}
	guard := ""
	if len(u.TrustFloor) > 0 {
		names := make([]string, len(u.TrustFloor))
		for i, t := range u.TrustFloor {
			names[i] = trustNames[t]
		}
		guard = " AND trust_level = ANY(" + arg(names) + ")"
	}
	q := "UPDATE memories SET " + strings.Join(sets, ", ") + " WHERE id = $1 AND owner_id = $2" + guard
	if u.Vector != nil {
		// New text makes a waiting vector of the next model stale: replaced, or dropped
		// (the re-embedding then embeds the row again).
		q = "WITH upd AS (" + q + " RETURNING id), "
		if u.Next != nil {
			q += "nx AS (INSERT INTO memory_next_embeddings (id, model, dims, embedding) SELECT id, " + arg(u.Next.Model) + ", " +
				arg(len(u.Next.Values)) + ", " + arg(u.Next.param()) + "::vector FROM upd ON CONFLICT (id) DO UPDATE SET " +
				"model = excluded.model, dims = excluded.dims, embedding = excluded.embedding)"
		} else {
			q += "nx AS (DELETE FROM memory_next_embeddings WHERE id IN (SELECT id FROM upd))"
		}
		q += " SELECT id FROM upd"
	}
	var tag pgconn.CommandTag
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) (err error) {
		if err := lockOwner(ctx, tx, owner); err != nil {
			return err
		}
		tag, err = tx.Exec(ctx, q, c.Args...)
		return err
	})
	if db.IsUniqueViolation(err) {
		return nil, fmt.Errorf("content: the same content of this type and repository is already memory of yours: %w", errs.ErrAlreadyExists)
	}
	if err != nil {
		return nil, fmt.Errorf("store: update memory: %w", err)
	}
	if tag.RowsAffected() == 0 {
		if guard != "" {
			if _, err := s.Get(ctx, owner, id); err == nil {
				return nil, fmt.Errorf("trust_level: a service cannot raise a memory's trust; a person promotes it (PromoteMemory): %w", errs.ErrPermissionDenied)
			}
		}
		return nil, fmt.Errorf("memory %q: %w", id, errs.ErrNotFound)
	}
	r, err := s.Get(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	return r.Memory, nil
}

// lockOwner locks owner's version row (migration 00007) for the rest of tx. Every insert,
// update and delete of one of the owner's memories takes that row too (the version
// trigger), after the memory's own row: a transaction changing two memories would hold it
// while waiting for the second memory, which another change holds while it waits for the
// version row. So every change of existing memories takes it first, and the locks are
// always taken in that order. An owner without the row has no memory to change.
func lockOwner(ctx context.Context, tx pgx.Tx, owner string) error {
	if _, err := tx.Exec(ctx, `SELECT 1 FROM memory_owner_versions WHERE owner_id = $1 FOR NO KEY UPDATE`, owner); err != nil {
		return fmt.Errorf("lock the owner's version: %w", err)
	}
	return nil
}

// ErrIntegrity is a memory whose content no longer matches its content_hash.
var ErrIntegrity = errors.New("content does not match content_hash")

// Promote raises a memory to USER for the person by, recording who and when; one already
// at USER is returned unchanged. It reads the memory of owner, or of anyone when anyOwner
// (an admin). A memory not found that way (or expired) is errs.ErrNotFound; one whose
// content no longer matches its hash is not promoted (ErrIntegrity, with the row).
func (s *Store) Promote(ctx context.Context, owner string, anyOwner bool, id, by string) (*Row, error) {
	var memOwner string
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		// The memory's owner (an admin's promotion names no owner), whose version is locked
		// first (lockOwner); an owner never changes.
		if err := tx.QueryRow(ctx, `SELECT owner_id FROM memories WHERE id = $1 AND ($3 OR owner_id = $2)`, id, owner, anyOwner).Scan(&memOwner); err != nil {
			return err
		}
		if err := lockOwner(ctx, tx, memOwner); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `UPDATE memories SET trust_level = 'user',
			promoted_by = CASE WHEN trust_level = 'user' THEN promoted_by ELSE $3 END,
			promote_time = CASE WHEN trust_level = 'user' THEN promote_time ELSE now() END,
			update_time = CASE WHEN trust_level = 'user' THEN update_time ELSE now() END
		WHERE id = $1 AND ($4 OR owner_id = $2) AND (expire_time IS NULL OR expire_time > now())
			AND encode(sha256(convert_to(content, 'UTF8')), 'hex') = content_hash
		RETURNING owner_id`, id, owner, by, anyOwner).Scan(&memOwner)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		// Not there, or its content was changed behind the service's back.
		r, gerr := scanMemory(s.pool.QueryRow(ctx, "SELECT "+memoryColumns+` FROM memories m
			WHERE m.id = $1 AND ($3 OR m.owner_id = $2) AND (m.expire_time IS NULL OR m.expire_time > now())`, id, owner, anyOwner))
		if gerr == nil && !r.HashOK {
			return r, ErrIntegrity
		}
		return nil, fmt.Errorf("memory %q: %w", id, errs.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: promote memory: %w", err)
	}
	return s.Get(ctx, memOwner, id)
}

// MarkUsed adds a use to each of owner's memories among ids and returns the ids it marked.
// With a requestID, the first call leaves a mark (use_marks) in the same transaction, and a
// later call with the same requestID returns the ids the first marked and counts nothing
// again. Marks older than a day are dropped as new ones are made.
func (s *Store) MarkUsed(ctx context.Context, owner string, ids []string, requestID string) ([]string, error) {
	var out []string
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		if requestID != "" {
			tag, err := tx.Exec(ctx, `INSERT INTO use_marks (owner_id, request_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`, owner, requestID)
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 0 { // a retry: the first call's answer
				return tx.QueryRow(ctx, `SELECT marked_ids::text[] FROM use_marks WHERE owner_id = $1 AND request_id = $2`,
					owner, requestID).Scan(&out)
			}
		}
		if err := lockOwner(ctx, tx, owner); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `UPDATE memories SET use_count = use_count + 1, last_used_time = now()
			WHERE owner_id = $1 AND id = ANY($2::uuid[]) RETURNING id::text`, owner, ids)
		if err != nil {
			return err
		}
		if out, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return err
		}
		if requestID == "" {
			return nil
		}
		if _, err := tx.Exec(ctx, `UPDATE use_marks SET marked_ids = $3::uuid[] WHERE owner_id = $1 AND request_id = $2`,
			owner, requestID, nonNil(out)); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM use_marks WHERE create_time < now() - interval '1 day'`)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: mark used: %w", err)
	}
	return out, nil
}

// maxAccessesInFlight bounds the access recordings written in the background.
const maxAccessesInFlight = 64

// accessTimeout bounds one background access recording.
const accessTimeout = 10 * time.Second

// RecordAccessLater counts an access of each memory in the background, off the request's
// path (a search's answer does not wait for it), and calls failed with the error if the
// write fails. Get, List and consolidation on this store wait for it (accessesLanded); a
// search's results and another replica may read the count before it lands, as a crash may
// lose it (counts are statistics). With maxAccessesInFlight already in flight it is written
// at once.
func (s *Store) RecordAccessLater(ctx context.Context, owner string, ids []string, failed func(error)) {
	if len(ids) == 0 {
		return
	}
	select {
	case s.accessSlots <- struct{}{}:
	default:
		if err := s.RecordAccess(ctx, owner, ids); err != nil {
			failed(err)
		}
		return
	}
	s.accesses.RLock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), accessTimeout)
	go func() {
		defer func() { cancel(); s.accesses.RUnlock(); <-s.accessSlots }()
		if err := s.RecordAccess(ctx, owner, ids); err != nil {
			failed(err)
		}
	}()
}

// accessesLanded returns once every access recorded in the background so far is written.
func (s *Store) accessesLanded() {
	s.accesses.Lock() // waits for the recordings (read locks) in flight
	s.accesses.Unlock()
}

// RecordAccess counts an access of each memory.
func (s *Store) RecordAccess(ctx context.Context, owner string, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	// Counted without waiting for the WAL to reach the disk (every search ends here): a
	// crash may lose the last few counts, which are statistics, and never a memory. The
	// rows are locked in id order, so that concurrent recordings of the same memories
	// cannot deadlock.
	if err := db.LazyExec(ctx, s.pool, `INSERT INTO memory_access (memory_id, access_count, last_accessed_time)
		SELECT m.id, 1, now() FROM unnest($2::uuid[]) AS u(id) JOIN memories m ON m.id = u.id WHERE m.owner_id = $1
		ORDER BY m.id
		ON CONFLICT (memory_id) DO UPDATE SET access_count = memory_access.access_count + 1, last_accessed_time = now()`, owner, ids); err != nil {
		return fmt.Errorf("store: record access: %w", err)
	}
	return nil
}

// RecordIntegrityFailure remembers a memory whose content no longer matches its hash.
func (s *Store) RecordIntegrityFailure(ctx context.Context, owner, id string) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO integrity_failures (memory_id, owner_id) VALUES ($1, $2)
		ON CONFLICT (memory_id) DO UPDATE SET detect_time = now()`, id, owner)
	if err != nil {
		return fmt.Errorf("store: record integrity failure: %w", err)
	}
	return nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
