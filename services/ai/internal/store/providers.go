package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/db"
	"github.com/thefold/thefold/pkg/errs"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
)

// KindName is the stored name of k, e.g. "openai_compatible".
func KindName(k aiv1.ProviderKind) string {
	return strings.ToLower(strings.TrimPrefix(k.String(), "PROVIDER_KIND_"))
}

func parseKind(name string) aiv1.ProviderKind {
	return aiv1.ProviderKind(aiv1.ProviderKind_value["PROVIDER_KIND_"+strings.ToUpper(name)])
}

const providerColumns = `p.id::text, p.name, p.kind, p.base_url, p.api_key_ref, p.enabled, p.create_time, p.update_time`

func scanProvider(row pgx.Row) (*aiv1.Provider, error) {
	var (
		p                      aiv1.Provider
		kind                   string
		createTime, updateTime time.Time
	)
	if err := row.Scan(&p.Id, &p.Name, &kind, &p.BaseUrl, &p.ApiKeyRef, &p.Enabled, &createTime, &updateTime); err != nil {
		return nil, err
	}
	p.Kind = parseKind(kind)
	p.CreateTime = timestamppb.New(createTime)
	p.UpdateTime = timestamppb.New(updateTime)
	return &p, nil
}

func providerNotFound(id string) error { return fmt.Errorf("provider %q: %w", id, errs.ErrNotFound) }

// getProvider reads one provider without its models; lock is "" or a locking clause.
func getProvider(ctx context.Context, q querier, id, lock string) (*aiv1.Provider, error) {
	p, err := scanProvider(q.QueryRow(ctx, "SELECT "+providerColumns+" FROM providers p WHERE p.id = $1 "+lock, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, providerNotFound(id)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get provider %s: %w", id, err)
	}
	return p, nil
}

// CreateProvider inserts p (validated by the caller) and returns it as stored. A name taken
// (case-insensitively) is errs.ErrAlreadyExists.
func (s *Store) CreateProvider(ctx context.Context, p *aiv1.Provider) (*aiv1.Provider, error) {
	created, err := scanProvider(s.pool.QueryRow(ctx, `INSERT INTO providers AS p (name, kind, base_url, api_key_ref, enabled)
		VALUES ($1, $2, $3, $4, $5) RETURNING `+providerColumns,
		p.Name, KindName(p.Kind), p.BaseUrl, p.ApiKeyRef, p.Enabled))
	if err != nil {
		return nil, dbError("store: insert provider", err)
	}
	return created, nil
}

// GetProvider returns provider id with its models.
func (s *Store) GetProvider(ctx context.Context, id string) (*aiv1.Provider, error) {
	var p *aiv1.Provider
	err := db.ReadTx(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		if p, err = getProvider(ctx, tx, id, ""); err != nil {
			return err
		}
		return attachModels(ctx, tx, []*aiv1.Provider{p}, false)
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// ProviderCursor is a position in ListProviders' order: the last provider of a page.
type ProviderCursor struct {
	// Name is the provider's name in lower case (the order's key).
	Name string
	ID   string
}

// ProviderFilter selects providers for ListProviders; zero fields match anything.
type ProviderFilter struct {
	// EnabledOnly leaves out disabled providers and disabled models.
	EnabledOnly bool
	// Name matches case-insensitively, as names are unique.
	Name string
	// PageSize is the number of providers to return, > 0.
	PageSize int
	After    *ProviderCursor
}

// ListProviders returns a page of providers by name, each with its models, and the cursor of
// the next page (nil on the last).
func (s *Store) ListProviders(ctx context.Context, f ProviderFilter) ([]*aiv1.Provider, *ProviderCursor, error) {
	if f.PageSize <= 0 {
		return nil, nil, errors.New("store: list providers: page size must be positive")
	}
	var w db.Conds
	if f.EnabledOnly {
		w.Add("p.enabled")
	}
	if f.Name != "" {
		w.Add(`lower(p.name) COLLATE "C" = lower($%d::text) COLLATE "C"`, f.Name)
	}
	if f.After != nil {
		w.Add(`(lower(p.name) COLLATE "C", p.id) > ($%d::text COLLATE "C", $%d::uuid)`, f.After.Name, f.After.ID)
	}
	query := "SELECT " + providerColumns + " FROM providers p" + w.Where() +
		` ORDER BY lower(p.name) COLLATE "C", p.id LIMIT ` + w.Arg(f.PageSize+1)
	var (
		out  []*aiv1.Provider
		next *ProviderCursor
	)
	err := db.ReadTx(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, query, w.Args...)
		if err != nil {
			return fmt.Errorf("store: list providers: %w", err)
		}
		if out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (*aiv1.Provider, error) { return scanProvider(r) }); err != nil {
			return fmt.Errorf("store: list providers: %w", err)
		}
		// One row more than the page says whether another page follows.
		if len(out) > f.PageSize {
			out = out[:f.PageSize]
			last := out[len(out)-1]
			next = &ProviderCursor{Name: strings.ToLower(last.Name), ID: last.Id}
		}
		return attachModels(ctx, tx, out, f.EnabledOnly)
	})
	if err != nil {
		return nil, nil, err
	}
	return out, next, nil
}

// attachModels sets each provider's models (by tier, then name).
func attachModels(ctx context.Context, q querier, ps []*aiv1.Provider, enabledOnly bool) error {
	if len(ps) == 0 {
		return nil
	}
	ids := make([]string, len(ps))
	byID := make(map[string]*aiv1.Provider, len(ps))
	for i, p := range ps {
		ids[i] = p.Id
		byID[p.Id] = p
	}
	query := "SELECT " + modelColumns + " FROM models m WHERE m.provider_id = ANY($1::uuid[])"
	if enabledOnly {
		query += " AND m.enabled"
	}
	rows, err := q.Query(ctx, query+` ORDER BY m.tier, m.name COLLATE "C", m.id`, ids)
	if err != nil {
		return fmt.Errorf("store: provider models: %w", err)
	}
	models, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*aiv1.Model, error) { return scanModel(r) })
	if err != nil {
		return fmt.Errorf("store: provider models: %w", err)
	}
	for _, m := range models {
		p := byID[m.ProviderId]
		p.Models = append(p.Models, m)
	}
	return nil
}

// ProviderFields are the update_mask paths UpdateProvider accepts.
var ProviderFields = []string{"name", "kind", "base_url", "api_key_ref", "enabled"}

// setProviderField copies field from src to dst.
func setProviderField(dst, src *aiv1.Provider, field string) error {
	switch field {
	case "name":
		dst.Name = src.Name
	case "kind":
		dst.Kind = src.Kind
	case "base_url":
		dst.BaseUrl = src.BaseUrl
	case "api_key_ref":
		dst.ApiKeyRef = src.ApiKeyRef
	case "enabled":
		dst.Enabled = src.Enabled
	default:
		return fmt.Errorf("field %q is not updatable: %w", field, errs.ErrInvalid)
	}
	return nil
}

// UpdateProvider copies fields (ProviderFields names) from p to provider id and returns it
// after the change, with its models. check, when set, sees the provider before and after
// the change, under the row lock, and may refuse it (a rule that spans fields, such as an
// OpenAI-compatible provider needing a base URL, holds for the result).
func (s *Store) UpdateProvider(ctx context.Context, id string, p *aiv1.Provider, fields []string, check func(before, after *aiv1.Provider) error) (*aiv1.Provider, error) {
	return lockedUpdate(ctx, s, fields, p, check,
		func(tx pgx.Tx) (*aiv1.Provider, error) { return getProvider(ctx, tx, id, "FOR UPDATE") },
		setProviderField,
		func(tx pgx.Tx, after *aiv1.Provider) (*aiv1.Provider, error) {
			updated, err := scanProvider(tx.QueryRow(ctx, `UPDATE providers AS p SET name = $2, kind = $3, base_url = $4,
				api_key_ref = $5, enabled = $6, update_time = now()
			WHERE p.id = $1 RETURNING `+providerColumns,
				id, after.Name, KindName(after.Kind), after.BaseUrl, after.ApiKeyRef, after.Enabled))
			if err != nil {
				return nil, dbError("store: update provider", err)
			}
			return updated, attachModels(ctx, tx, []*aiv1.Provider{updated}, false)
		})
}

// DeleteProvider deletes provider id. One that still has models is
// errs.ErrFailedPrecondition; usage records keep its name.
func (s *Store) DeleteProvider(ctx context.Context, id string) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		p, err := getProvider(ctx, tx, id, "FOR UPDATE")
		if err != nil {
			return err
		}
		// The row lock holds off new models (their foreign key takes a share lock on it), so
		// the count is the one the delete sees.
		var n int
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM models WHERE provider_id = $1", id).Scan(&n); err != nil {
			return fmt.Errorf("store: count models: %w", err)
		}
		if n > 0 {
			return fmt.Errorf("provider %s has %d model(s); delete them first: %w", p.Name, n, errs.ErrFailedPrecondition)
		}
		if _, err := tx.Exec(ctx, "DELETE FROM providers WHERE id = $1", id); err != nil {
			if isForeignKey(err) {
				return fmt.Errorf("provider %s has models; delete them first: %w", p.Name, errs.ErrFailedPrecondition)
			}
			return fmt.Errorf("store: delete provider: %w", err)
		}
		return nil
	})
}

// Catalogue returns every provider, by name, each with all its models: the registry's view,
// read in one snapshot.
func (s *Store) Catalogue(ctx context.Context) ([]*aiv1.Provider, error) {
	var out []*aiv1.Provider
	err := db.ReadTx(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, "SELECT "+providerColumns+` FROM providers p ORDER BY lower(p.name) COLLATE "C", p.id`)
		if err != nil {
			return fmt.Errorf("store: catalogue: %w", err)
		}
		if out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (*aiv1.Provider, error) { return scanProvider(r) }); err != nil {
			return fmt.Errorf("store: catalogue: %w", err)
		}
		return attachModels(ctx, tx, out, false)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// lockedUpdate is the one way a registry row is updated: read it under a row lock, copy
// fields from src onto a clone, let check refuse the result (rules that span fields hold
// for it), and write it, all in one transaction.
func lockedUpdate[T proto.Message](ctx context.Context, s *Store, fields []string, src T, check func(before, after T) error,
	get func(pgx.Tx) (T, error), set func(dst, src T, field string) error, write func(pgx.Tx, T) (T, error)) (T, error) {
	var zero, updated T
	if len(fields) == 0 {
		return zero, fmt.Errorf("no fields to update: %w", errs.ErrInvalid)
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		before, err := get(tx)
		if err != nil {
			return err
		}
		after := proto.CloneOf(before)
		for _, f := range slices.Compact(slices.Sorted(slices.Values(fields))) {
			if err := set(after, src, f); err != nil {
				return err
			}
		}
		if check != nil {
			if err := check(before, after); err != nil {
				return err
			}
		}
		updated, err = write(tx, after)
		return err
	})
	if err != nil {
		return zero, err
	}
	return updated, nil
}
