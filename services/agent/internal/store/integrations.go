package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/db"
	"github.com/thefold/thefold/pkg/errs"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	"github.com/thefold/thefold/pkg/protoenum"
	"github.com/thefold/thefold/pkg/validate"
)

// IntegrationKindName is the stored name of k ("slack", "discord").
func IntegrationKindName(k agentv1.IntegrationKind) string {
	return protoenum.Name(k, "INTEGRATION_KIND_")
}

// NoticeKindName is the stored name of a notice kind ("review_ready").
func NoticeKindName(k agentv1.NoticeKind) string { return protoenum.Name(k, "NOTICE_KIND_") }

// IntegrationRecord is an integration with its sealed secrets.
type IntegrationRecord struct {
	*agentv1.Integration
	// WebhookSealed and InboundSealed are the sealed webhook URL and inbound secret
	// (InboundSealed nil: none).
	WebhookSealed, InboundSealed []byte
}

const integrationColumns = `id::text, owner_id, kind, name, webhook_sealed, webhook_hint, inbound_sealed, external_user_id,
	coalesce(conversation_id::text, ''), notices, enabled, disabled_reason, consecutive_failures, last_delivery_time, create_time`

func scanIntegration(row pgx.Row) (*IntegrationRecord, error) {
	var (
		in         = &agentv1.Integration{}
		rec        = &IntegrationRecord{Integration: in}
		kind       string
		notices    []string
		last       *time.Time
		created    time.Time
		inboundRaw []byte
	)
	if err := row.Scan(&in.Id, &in.OwnerId, &kind, &in.Name, &rec.WebhookSealed, &in.WebhookHint, &inboundRaw, &in.ExternalUserId,
		&in.ConversationId, &notices, &in.Enabled, &in.DisabledReason, &in.ConsecutiveFailures, &last, &created); err != nil {
		return nil, err
	}
	in.Kind = protoenum.Parse[agentv1.IntegrationKind](kind, "INTEGRATION_KIND_", agentv1.IntegrationKind_value)
	for _, n := range notices {
		in.Notices = append(in.Notices, protoenum.Parse[agentv1.NoticeKind](n, "NOTICE_KIND_", agentv1.NoticeKind_value))
	}
	if len(inboundRaw) > 0 {
		rec.InboundSealed, in.InboundConfigured = inboundRaw, true
	}
	if last != nil {
		in.LastDeliveryTime = timestamppb.New(*last)
	}
	in.CreateTime = timestamppb.New(created)
	return rec, nil
}

// CreateIntegration stores in (owner, kind, name, hint, external user, conversation and
// notices set) with its sealed secrets; a retry with requestID returns the first. Another
// integration of the kind for the same external user is ALREADY_EXISTS.
func (s *Store) CreateIntegration(ctx context.Context, in *agentv1.Integration, webhook, inbound []byte, requestID string) (*agentv1.Integration, error) {
	if requestID != "" {
		rec, err := scanIntegration(s.pool.QueryRow(ctx, `SELECT `+integrationColumns+` FROM integrations WHERE owner_id = $1 AND request_id = $2`,
			in.OwnerId, requestID))
		if err == nil {
			return rec.Integration, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return nil, err
		}
	}
	notices := make([]string, 0, len(in.Notices))
	for _, n := range in.Notices {
		notices = append(notices, NoticeKindName(n))
	}
	var conv any
	if in.ConversationId != "" {
		conv = in.ConversationId
	}
	rec, err := scanIntegration(s.pool.QueryRow(ctx, `INSERT INTO integrations (owner_id, request_id, kind, name, webhook_sealed, webhook_hint,
			inbound_sealed, external_user_id, conversation_id, notices)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING `+integrationColumns,
		in.OwnerId, requestID, IntegrationKindName(in.Kind), in.Name, webhook, in.WebhookHint, inbound, in.ExternalUserId, conv, notices))
	switch {
	case db.IsUniqueViolation(err, "integrations_external_user"):
		return nil, fmt.Errorf("%s user %q is connected to an integration already: %w", IntegrationKindName(in.Kind), in.ExternalUserId, errs.ErrAlreadyExists)
	case db.IsUniqueViolation(err):
		return nil, fmt.Errorf("a CreateIntegration with request_id %q is in progress; retry: %w", requestID, errs.ErrConflict)
	case err != nil:
		return nil, err
	}
	return rec.Integration, nil
}

// GetIntegration returns owner's integration id.
func (s *Store) GetIntegration(ctx context.Context, owner, id string) (*IntegrationRecord, error) {
	rec, err := scanIntegration(s.pool.QueryRow(ctx, `SELECT `+integrationColumns+` FROM integrations WHERE id = $1 AND owner_id = $2`, id, owner))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errs.NotFound("integration", id)
	}
	return rec, err
}

// IntegrationOfUser returns the integration of kind connected to the external user; nil
// when there is none.
func (s *Store) IntegrationOfUser(ctx context.Context, kind agentv1.IntegrationKind, user string) (*IntegrationRecord, error) {
	rec, err := scanIntegration(s.pool.QueryRow(ctx, `SELECT `+integrationColumns+` FROM integrations WHERE kind = $1 AND external_user_id = $2`,
		IntegrationKindName(kind), user))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return rec, err
}

// ListIntegrations returns a page of owner's integrations, newest first.
func (s *Store) ListIntegrations(ctx context.Context, owner string, size int, token string) ([]*agentv1.Integration, string, error) {
	var c db.Conds
	c.Add("owner_id = $%d", owner)
	if err := pageAfter(token, "i1", "ListIntegrations", &c); err != nil {
		return nil, "", err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+integrationColumns+` FROM integrations`+c.Where()+` ORDER BY create_time DESC, id DESC LIMIT `+c.Arg(size+1), c.Args...)
	if err != nil {
		return nil, "", err
	}
	defer rows.Close()
	var out []*agentv1.Integration
	for rows.Next() {
		rec, err := scanIntegration(rows)
		if err != nil {
			return nil, "", err
		}
		out = append(out, rec.Integration)
	}
	if err := rows.Err(); err != nil {
		return nil, "", err
	}
	next := ""
	if len(out) > size {
		out = out[:size]
		last := out[size-1]
		next = validate.EncodeTimeIDToken("i1", last.CreateTime.AsTime(), last.Id)
	}
	return out, next, nil
}

// DeleteIntegration deletes owner's integration id with its pending deliveries.
func (s *Store) DeleteIntegration(ctx context.Context, owner, id string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM integrations WHERE id = $1 AND owner_id = $2`, id, owner)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return errs.NotFound("integration", id)
	}
	return nil
}

// SetIntegrationConversation records the conversation an integration's inbound messages go
// to.
func (s *Store) SetIntegrationConversation(ctx context.Context, id, conv string) error {
	_, err := s.pool.Exec(ctx, `UPDATE integrations SET conversation_id = $2 WHERE id = $1`, id, conv)
	return err
}

// queueDeliveries queues on b the deliveries of notice m of conversation c to the enabled
// integrations of c's owner that post its kind, unless the owner's preferences turned
// moment off.
func queueDeliveries(b *pgx.Batch, c *agentv1.Conversation, m *agentv1.ConversationMessage, moment Moment) {
	kind := m.GetNotice().GetKind()
	if kind == agentv1.NoticeKind_NOTICE_KIND_UNSPECIFIED || kind == agentv1.NoticeKind_NOTICE_KIND_SUMMARISED {
		return
	}
	wanted := "true"
	if col, ok := momentColumns[moment]; ok {
		// No row: the defaults, every moment on.
		wanted = `NOT EXISTS (SELECT 1 FROM user_preferences p WHERE p.user_id = $1 AND NOT p.` + col + `)`
	}
	b.Queue(`INSERT INTO integration_deliveries (integration_id, message_id, conversation_id, text)
		SELECT id, $2, $3, $4 FROM integrations
		WHERE owner_id = $1 AND enabled AND (notices = '{}' OR $5 = ANY (notices)) AND `+wanted+`
		ON CONFLICT DO NOTHING`, c.OwnerId, m.Id, c.Id, m.Text, NoticeKindName(kind))
}

// Delivery is a notice waiting to be posted to an integration.
type Delivery struct {
	ID             int64
	Integration    *IntegrationRecord
	MessageID      string
	ConversationID string
	Text           string
	Attempts       int
}

// DueDeliveries takes up to limit deliveries whose time has come, pushing each one's next
// attempt lease seconds on (so another worker does not take it meanwhile).
func (s *Store) DueDeliveries(ctx context.Context, limit int, lease time.Duration) ([]Delivery, error) {
	var out []Delivery
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `UPDATE integration_deliveries d SET next_attempt_time = now() + $2::interval
			FROM (SELECT id FROM integration_deliveries WHERE next_attempt_time <= now() ORDER BY next_attempt_time LIMIT $1 FOR UPDATE SKIP LOCKED) due
			WHERE d.id = due.id
			RETURNING d.id, d.integration_id::text, d.message_id::text, d.conversation_id::text, d.text, d.attempts`,
			limit, fmt.Sprintf("%d milliseconds", lease.Milliseconds()))
		if err != nil {
			return err
		}
		type row struct {
			d   Delivery
			iid string
		}
		rs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
			var x row
			err := r.Scan(&x.d.ID, &x.iid, &x.d.MessageID, &x.d.ConversationID, &x.d.Text, &x.d.Attempts)
			return x, err
		})
		if err != nil {
			return err
		}
		for _, x := range rs {
			rec, err := scanIntegration(tx.QueryRow(ctx, `SELECT `+integrationColumns+` FROM integrations WHERE id = $1`, x.iid))
			if err != nil {
				return err
			}
			x.d.Integration = rec
			out = append(out, x.d)
		}
		return nil
	})
	return out, err
}

// Delivered records that delivery d was posted.
func (s *Store) Delivered(ctx context.Context, d Delivery) error {
	return db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		b.Queue(`DELETE FROM integration_deliveries WHERE id = $1`, d.ID)
		b.Queue(`UPDATE integrations SET consecutive_failures = 0, last_delivery_time = now() WHERE id = $1`, d.Integration.Id)
		return tx.SendBatch(ctx, b).Close()
	})
}

// DeliveryFailed records that posting delivery d failed with why: it is tried again after
// backoff unless it has had maxAttempts; the integration is disabled once it has failed
// maxFailures times in a row, its pending deliveries dropped, and disabled reports so.
func (s *Store) DeliveryFailed(ctx context.Context, d Delivery, why string, backoff time.Duration, maxAttempts, maxFailures int) (disabled bool, err error) {
	err = db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		var failures int
		var enabled bool
		if err := tx.QueryRow(ctx, `UPDATE integrations SET consecutive_failures = consecutive_failures + 1 WHERE id = $1
			RETURNING consecutive_failures, enabled`, d.Integration.Id).Scan(&failures, &enabled); err != nil {
			return err
		}
		b := &pgx.Batch{}
		if d.Attempts+1 >= maxAttempts {
			b.Queue(`DELETE FROM integration_deliveries WHERE id = $1`, d.ID)
		} else {
			b.Queue(`UPDATE integration_deliveries SET attempts = attempts + 1, last_error = $2, next_attempt_time = now() + $3::interval WHERE id = $1`,
				d.ID, why, fmt.Sprintf("%d milliseconds", backoff.Milliseconds()))
		}
		if enabled && failures >= maxFailures {
			disabled = true
			b.Queue(`UPDATE integrations SET enabled = false, disabled_reason = $2 WHERE id = $1`, d.Integration.Id,
				fmt.Sprintf("disabled after %d failed deliveries in a row; the last: %s", failures, why))
			b.Queue(`DELETE FROM integration_deliveries WHERE integration_id = $1`, d.Integration.Id)
		}
		return tx.SendBatch(ctx, b).Close()
	})
	return disabled, err
}

// SetIntegrationHealth records a test post of owner's integration id: a success enables it
// again and clears its failures; a failure counts as one.
func (s *Store) SetIntegrationHealth(ctx context.Context, owner, id string, ok bool) (*agentv1.Integration, error) {
	q := `UPDATE integrations SET consecutive_failures = consecutive_failures + 1 WHERE id = $1 AND owner_id = $2 RETURNING ` + integrationColumns
	if ok {
		q = `UPDATE integrations SET enabled = true, disabled_reason = '', consecutive_failures = 0, last_delivery_time = now()
			WHERE id = $1 AND owner_id = $2 RETURNING ` + integrationColumns
	}
	rec, err := scanIntegration(s.pool.QueryRow(ctx, q, id, owner))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errs.NotFound("integration", id)
	}
	if err != nil {
		return nil, err
	}
	return rec.Integration, nil
}

// InboundSeen returns the answer given to the inbound request with signature sig, nil when
// it is new.
func (s *Store) InboundSeen(ctx context.Context, sig string) ([]byte, error) {
	var answer []byte
	err := s.pool.QueryRow(ctx, `SELECT answer FROM integration_inbound WHERE signature = $1`, sig).Scan(&answer)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return answer, err
}

// InboundTaken records the answer to the inbound request with signature sig; false when
// another took it first.
func (s *Store) InboundTaken(ctx context.Context, sig string, answer []byte) (bool, error) {
	tag, err := s.pool.Exec(ctx, `INSERT INTO integration_inbound (signature, answer) VALUES ($1, $2) ON CONFLICT DO NOTHING`, sig, answer)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

// PruneInbound forgets the inbound requests taken before olderThan ago: their timestamps
// are outside the window a signature is accepted in, so a redelivery of one is refused
// anyway.
func (s *Store) PruneInbound(ctx context.Context, olderThan time.Duration) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM integration_inbound WHERE create_time < now() - $1::interval`,
		fmt.Sprintf("%d milliseconds", olderThan.Milliseconds()))
	return err
}

// InboundIntegrations returns up to limit integrations of kind that have an inbound secret,
// oldest first: a Discord PING names no user, so it is verified against each of their keys.
func (s *Store) InboundIntegrations(ctx context.Context, kind agentv1.IntegrationKind, limit int) ([]*IntegrationRecord, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+integrationColumns+` FROM integrations
		WHERE kind = $1 AND inbound_sealed IS NOT NULL AND length(inbound_sealed) > 0
		ORDER BY create_time, id LIMIT $2`, IntegrationKindName(kind), limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (*IntegrationRecord, error) { return scanIntegration(r) })
}
