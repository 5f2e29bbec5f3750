package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/db"
	"github.com/thefold/thefold/pkg/errs"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
)

// modelColumns selects a model as scanModel reads it; the table must be aliased m.
const modelColumns = `m.id::text, m.provider_id::text, m.name, m.display_name, m.tier,
	m.input_micros_per_mtok, m.output_micros_per_mtok, m.cache_read_micros_per_mtok, m.cache_write_micros_per_mtok,
	m.context_window, m.max_output_tokens, m.embedding_dimensions, m.tags, m.supports_tools, m.supports_vision,
	m.supports_reasoning, m.enabled, m.create_time, m.update_time`

func scanModel(row pgx.Row) (*aiv1.Model, error) {
	var (
		m                      aiv1.Model
		tier                   int16
		createTime, updateTime time.Time
	)
	err := row.Scan(&m.Id, &m.ProviderId, &m.Name, &m.DisplayName, &tier,
		&m.InputMicrosPerMtok, &m.OutputMicrosPerMtok, &m.CacheReadMicrosPerMtok, &m.CacheWriteMicrosPerMtok,
		&m.ContextWindow, &m.MaxOutputTokens, &m.EmbeddingDimensions, &m.Tags, &m.SupportsTools, &m.SupportsVision,
		&m.SupportsReasoning, &m.Enabled, &createTime, &updateTime)
	if err != nil {
		return nil, err
	}
	m.Tier = int32(tier)
	if len(m.Tags) == 0 {
		m.Tags = nil
	}
	m.CreateTime = timestamppb.New(createTime)
	m.UpdateTime = timestamppb.New(updateTime)
	return &m, nil
}

func modelNotFound(id string) error { return fmt.Errorf("model %q: %w", id, errs.ErrNotFound) }

func getModel(ctx context.Context, q querier, id, lock string) (*aiv1.Model, error) {
	m, err := scanModel(q.QueryRow(ctx, "SELECT "+modelColumns+" FROM models m WHERE m.id = $1 "+lock, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, modelNotFound(id)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get model %s: %w", id, err)
	}
	return m, nil
}

// CreateModel inserts m (validated by the caller) for m.ProviderId and returns it as stored.
// An unknown provider is errs.ErrNotFound; a name the provider already has is
// errs.ErrAlreadyExists.
func (s *Store) CreateModel(ctx context.Context, m *aiv1.Model) (*aiv1.Model, error) {
	created, err := scanModel(s.pool.QueryRow(ctx, `INSERT INTO models AS m (provider_id, name, display_name, tier,
			input_micros_per_mtok, output_micros_per_mtok, cache_read_micros_per_mtok, cache_write_micros_per_mtok,
			context_window, max_output_tokens, embedding_dimensions, tags, supports_tools, supports_vision,
			supports_reasoning, enabled)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
		RETURNING `+modelColumns,
		m.ProviderId, m.Name, m.DisplayName, int16(m.Tier),
		m.InputMicrosPerMtok, m.OutputMicrosPerMtok, m.CacheReadMicrosPerMtok, m.CacheWriteMicrosPerMtok,
		m.ContextWindow, m.MaxOutputTokens, m.EmbeddingDimensions, nonNil(m.Tags), m.SupportsTools, m.SupportsVision,
		m.SupportsReasoning, m.Enabled))
	if isForeignKey(err) {
		return nil, fmt.Errorf("provider_id: provider %q: %w", m.ProviderId, errs.ErrNotFound)
	}
	if err != nil {
		return nil, dbError("store: insert model", err)
	}
	return created, nil
}

// GetModel returns model id.
func (s *Store) GetModel(ctx context.Context, id string) (*aiv1.Model, error) {
	return getModel(ctx, s.pool, id, "")
}

// ModelCursor is a position in ListModels' order (provider name, tier, model name): the last
// model of a page.
type ModelCursor struct {
	// Provider is the provider's name in lower case.
	Provider string
	Tier     int32
	Name     string
	ID       string
}

// ModelFilter selects models for ListModels; zero fields match anything.
type ModelFilter struct {
	ProviderID string
	Tag        string
	Tier       int32
	// EnabledOnly leaves out disabled models and the models of disabled providers.
	EnabledOnly bool
	Name        string
	// PageSize is the number of models to return, > 0.
	PageSize int
	After    *ModelCursor
}

// ListModels returns a page of models ordered by provider name, tier and name, and the
// cursor of the next page (nil on the last).
func (s *Store) ListModels(ctx context.Context, f ModelFilter) ([]*aiv1.Model, *ModelCursor, error) {
	if f.PageSize <= 0 {
		return nil, nil, errors.New("store: list models: page size must be positive")
	}
	var w db.Conds
	if f.ProviderID != "" {
		w.Add("m.provider_id = $%d::uuid", f.ProviderID)
	}
	if f.Tag != "" {
		w.Add("m.tags @> ARRAY[$%d::text]", f.Tag)
	}
	if f.Tier != 0 {
		w.Add("m.tier = $%d", int16(f.Tier))
	}
	if f.EnabledOnly {
		w.Add("m.enabled AND p.enabled")
	}
	if f.Name != "" {
		w.Add("m.name = $%d", f.Name)
	}
	if f.After != nil {
		w.Add(`(lower(p.name) COLLATE "C", m.tier, m.name COLLATE "C", m.id) > ($%d::text COLLATE "C", $%d, $%d::text COLLATE "C", $%d::uuid)`,
			f.After.Provider, int16(f.After.Tier), f.After.Name, f.After.ID)
	}
	query := "SELECT " + modelColumns + ", lower(p.name) FROM models m JOIN providers p ON p.id = m.provider_id" + w.Where() +
		` ORDER BY lower(p.name) COLLATE "C", m.tier, m.name COLLATE "C", m.id LIMIT ` + w.Arg(f.PageSize+1)
	rows, err := s.pool.Query(ctx, query, w.Args...)
	if err != nil {
		return nil, nil, fmt.Errorf("store: list models: %w", err)
	}
	type listed struct {
		m        *aiv1.Model
		provider string
	}
	page, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (listed, error) {
		var l listed
		m, err := scanModel(&extraColumn{row: r, dest: &l.provider})
		l.m = m
		return l, err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("store: list models: %w", err)
	}
	var next *ModelCursor
	// One row more than the page says whether another page follows.
	if len(page) > f.PageSize {
		page = page[:f.PageSize]
		last := page[len(page)-1]
		next = &ModelCursor{Provider: last.provider, Tier: last.m.Tier, Name: last.m.Name, ID: last.m.Id}
	}
	out := make([]*aiv1.Model, len(page))
	for i, l := range page {
		out[i] = l.m
	}
	return out, next, nil
}

// extraColumn scans a row that has one column after the model's into dest.
type extraColumn struct {
	row  pgx.Row
	dest any
}

func (e *extraColumn) Scan(dest ...any) error { return e.row.Scan(append(dest, e.dest)...) }

// ModelFields are the update_mask paths UpdateModel accepts; provider_id is not one (a model
// does not move between providers).
var ModelFields = []string{
	"name", "display_name", "tier", "input_micros_per_mtok", "output_micros_per_mtok",
	"cache_read_micros_per_mtok", "cache_write_micros_per_mtok", "context_window",
	"max_output_tokens", "embedding_dimensions", "tags", "supports_tools", "supports_vision",
	"supports_reasoning", "enabled",
}

// setModelField copies field from src to dst.
func setModelField(dst, src *aiv1.Model, field string) error {
	switch field {
	case "name":
		dst.Name = src.Name
	case "display_name":
		dst.DisplayName = src.DisplayName
	case "tier":
		dst.Tier = src.Tier
	case "input_micros_per_mtok":
		dst.InputMicrosPerMtok = src.InputMicrosPerMtok
	case "output_micros_per_mtok":
		dst.OutputMicrosPerMtok = src.OutputMicrosPerMtok
	case "cache_read_micros_per_mtok":
		dst.CacheReadMicrosPerMtok = src.CacheReadMicrosPerMtok
	case "cache_write_micros_per_mtok":
		dst.CacheWriteMicrosPerMtok = src.CacheWriteMicrosPerMtok
	case "context_window":
		dst.ContextWindow = src.ContextWindow
	case "max_output_tokens":
		dst.MaxOutputTokens = src.MaxOutputTokens
	case "embedding_dimensions":
		dst.EmbeddingDimensions = src.EmbeddingDimensions
	case "tags":
		dst.Tags = slices.Clone(src.Tags)
	case "supports_tools":
		dst.SupportsTools = src.SupportsTools
	case "supports_vision":
		dst.SupportsVision = src.SupportsVision
	case "supports_reasoning":
		dst.SupportsReasoning = src.SupportsReasoning
	case "enabled":
		dst.Enabled = src.Enabled
	default:
		return fmt.Errorf("field %q is not updatable: %w", field, errs.ErrInvalid)
	}
	return nil
}

// UpdateModel copies fields (ModelFields names) from m to model id and returns it after the
// change. check, when set, sees the model before and after the change, under the row lock,
// and may refuse it (rules that span fields hold for the result).
func (s *Store) UpdateModel(ctx context.Context, id string, m *aiv1.Model, fields []string, check func(before, after *aiv1.Model) error) (*aiv1.Model, error) {
	return lockedUpdate(ctx, s, fields, m, check,
		func(tx pgx.Tx) (*aiv1.Model, error) { return getModel(ctx, tx, id, "FOR UPDATE") },
		setModelField,
		func(tx pgx.Tx, after *aiv1.Model) (*aiv1.Model, error) {
			updated, err := scanModel(tx.QueryRow(ctx, `UPDATE models AS m SET name = $2, display_name = $3, tier = $4,
				input_micros_per_mtok = $5, output_micros_per_mtok = $6, cache_read_micros_per_mtok = $7,
				cache_write_micros_per_mtok = $8, context_window = $9, max_output_tokens = $10,
				embedding_dimensions = $11, tags = $12, supports_tools = $13, supports_vision = $14,
				supports_reasoning = $15, enabled = $16, update_time = now()
			WHERE m.id = $1 RETURNING `+modelColumns,
				id, after.Name, after.DisplayName, int16(after.Tier),
				after.InputMicrosPerMtok, after.OutputMicrosPerMtok, after.CacheReadMicrosPerMtok, after.CacheWriteMicrosPerMtok,
				after.ContextWindow, after.MaxOutputTokens, after.EmbeddingDimensions, nonNil(after.Tags),
				after.SupportsTools, after.SupportsVision, after.SupportsReasoning, after.Enabled))
			if err != nil {
				return nil, dbError("store: update model", err)
			}
			return updated, nil
		})
}

// DeleteModel deletes model id; usage records keep its name.
func (s *Store) DeleteModel(ctx context.Context, id string) error {
	tag, err := s.pool.Exec(ctx, "DELETE FROM models WHERE id = $1", id)
	if err != nil {
		return fmt.Errorf("store: delete model: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return modelNotFound(id)
	}
	return nil
}
