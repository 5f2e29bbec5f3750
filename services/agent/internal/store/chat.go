package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/db"
	"github.com/thefold/thefold/pkg/errs"
	"github.com/thefold/thefold/pkg/events"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/jobrun"
	"github.com/thefold/thefold/pkg/protoenum"
	"github.com/thefold/thefold/pkg/usage"
	"github.com/thefold/thefold/pkg/validate"
)

// ChatStream is the events stream of conversations; an event's aggregate and scope are the
// conversation's id.
const ChatStream = "conversation"

// Reply statuses as stored.
const (
	ReplyRunning   = "running"
	ReplyCompleted = "completed"
	ReplyCancelled = "cancelled"
	ReplyFailed    = "failed"
)

var replyStatuses = map[string]agentv1.ReplyStatus{
	ReplyRunning:   agentv1.ReplyStatus_REPLY_STATUS_RUNNING,
	ReplyCompleted: agentv1.ReplyStatus_REPLY_STATUS_COMPLETED,
	ReplyCancelled: agentv1.ReplyStatus_REPLY_STATUS_CANCELLED,
	ReplyFailed:    agentv1.ReplyStatus_REPLY_STATUS_FAILED,
}

var roleNames = map[agentv1.ChatRole]string{
	agentv1.ChatRole_CHAT_ROLE_USER:        "user",
	agentv1.ChatRole_CHAT_ROLE_ASSISTANT:   "assistant",
	agentv1.ChatRole_CHAT_ROLE_TOOL_CALL:   "tool_call",
	agentv1.ChatRole_CHAT_ROLE_TOOL_RESULT: "tool_result",
	agentv1.ChatRole_CHAT_ROLE_SYSTEM:      "system",
}

// ReplyLeases are the reply runners' leases (jobrun.Leases over conversation_replies): a
// RUNNING reply should have a runner.
func (s *Store) ReplyLeases() *jobrun.Leases {
	return &jobrun.Leases{DB: s.pool, Table: "conversation_replies", Active: []string{ReplyRunning}}
}

const conversationColumns = `id::text, owner_id, title, archived, repo, summary, summary_seq, last_seq,
	coalesce(active_reply_id::text, ''), usage, create_time, update_time`

// ConversationRecord is a conversation with what only the agent needs.
type ConversationRecord struct {
	*agentv1.Conversation
	// SummarySeq is the last message the summary covers (0: none).
	SummarySeq int64
}

func scanConversation(row pgx.Row) (*ConversationRecord, error) {
	var (
		c          = &agentv1.Conversation{}
		rec        = &ConversationRecord{Conversation: c}
		use        []byte
		last       int64
		created, u time.Time
	)
	if err := row.Scan(&c.Id, &c.OwnerId, &c.Title, &c.Archived, &c.Repo, &c.Summary, &rec.SummarySeq, &last,
		&c.ActiveReplyId, &use, &created, &u); err != nil {
		return nil, err
	}
	c.MessageCount = int32(last)
	c.CreateTime, c.UpdateTime = timestamppb.New(created), timestamppb.New(u)
	c.Usage = &typev1.Usage{}
	if len(use) > 0 {
		if err := proto.Unmarshal(use, c.Usage); err != nil {
			return nil, fmt.Errorf("store: conversation %s usage: %w", c.Id, err)
		}
	}
	return rec, nil
}

func notFoundConversation(id string) error { return errs.NotFound("conversation", id) }

// conversationEvent queues one event of conversation c on b.
func conversationEvent(b *pgx.Batch, c *agentv1.Conversation, e *agentv1.WatchConversationResponse) error {
	e.ConversationId = c.Id
	payload, err := jsonOut.Marshal(e)
	if err != nil {
		return fmt.Errorf("store: marshal conversation event: %w", err)
	}
	return events.QueueAppend(b, nil, events.Event{Stream: ChatStream, AggregateID: c.Id, OwnerID: c.OwnerId, Scope: c.Id,
		Type: protoenum.Name(e.Type, "CONVERSATION_EVENT_TYPE_"), Payload: payload})
}

// CreateConversation stores a new conversation of c.OwnerId; a retry with requestID returns
// the first one.
func (s *Store) CreateConversation(ctx context.Context, c *agentv1.Conversation, requestID string) (*agentv1.Conversation, error) {
	var out *agentv1.Conversation
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		if requestID != "" {
			rec, err := scanConversation(tx.QueryRow(ctx, `SELECT `+conversationColumns+` FROM conversations WHERE owner_id = $1 AND request_id = $2`,
				c.OwnerId, requestID))
			switch {
			case err == nil:
				out = rec.Conversation
				return nil
			case !errors.Is(err, pgx.ErrNoRows):
				return err
			}
		}
		rec, err := scanConversation(tx.QueryRow(ctx, `INSERT INTO conversations (owner_id, request_id, title, repo)
			VALUES ($1, $2, $3, $4) RETURNING `+conversationColumns, c.OwnerId, requestID, c.Title, c.Repo))
		if err != nil {
			if db.IsUniqueViolation(err) {
				return fmt.Errorf("a CreateConversation with request_id %q is in progress; retry: %w", requestID, errs.ErrConflict)
			}
			return err
		}
		out = rec.Conversation
		return nil
	})
	return out, err
}

// GetConversation returns owner's conversation id; NOT_FOUND for anyone else's.
func (s *Store) GetConversation(ctx context.Context, owner, id string) (*ConversationRecord, error) {
	rec, err := scanConversation(s.pool.QueryRow(ctx, `SELECT `+conversationColumns+` FROM conversations WHERE id = $1 AND owner_id = $2`, id, owner))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFoundConversation(id)
	}
	return rec, err
}

const conversationTokenVersion = "c1"

// ListConversations returns a page of owner's conversations, the most recently active
// first.
func (s *Store) ListConversations(ctx context.Context, owner string, archived bool, size int, token string) ([]*agentv1.Conversation, string, error) {
	var c db.Conds
	c.Add("owner_id = $%d", owner)
	if !archived {
		c.Add("NOT archived")
	}
	if token != "" {
		at, id, err := validate.DecodeTimeIDToken(token, conversationTokenVersion, "ListConversations")
		if err != nil {
			return nil, "", err
		}
		c.Add("(update_time, id) < ($%d, $%d::uuid)", at, id)
	}
	rows, err := s.pool.Query(ctx, `SELECT `+conversationColumns+` FROM conversations`+c.Where()+
		` ORDER BY update_time DESC, id DESC LIMIT `+c.Arg(size+1), c.Args...)
	if err != nil {
		return nil, "", err
	}
	defer rows.Close()
	var out []*agentv1.Conversation
	for rows.Next() {
		rec, err := scanConversation(rows)
		if err != nil {
			return nil, "", err
		}
		out = append(out, rec.Conversation)
	}
	if err := rows.Err(); err != nil {
		return nil, "", err
	}
	next := ""
	if len(out) > size {
		out = out[:size]
		last := out[size-1]
		next = validate.EncodeTimeIDToken(conversationTokenVersion, last.UpdateTime.AsTime(), last.Id)
	}
	return out, next, nil
}

// lockConversation locks owner's conversation id in tx (owner "" for any owner's).
func lockConversation(ctx context.Context, tx pgx.Tx, owner, id string) (*ConversationRecord, error) {
	q, args := `SELECT `+conversationColumns+` FROM conversations WHERE id = $1`, []any{id}
	if owner != "" {
		q, args = q+` AND owner_id = $2`, append(args, owner)
	}
	rec, err := scanConversation(tx.QueryRow(ctx, q+` FOR UPDATE`, args...))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFoundConversation(id)
	}
	return rec, err
}

// UpdateConversation applies fn to owner's conversation id (title, archived, repo) and
// stores it with an UPDATED event.
func (s *Store) UpdateConversation(ctx context.Context, owner, id string, fn func(*agentv1.Conversation) error) (*agentv1.Conversation, error) {
	var out *agentv1.Conversation
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		rec, err := lockConversation(ctx, tx, owner, id)
		if err != nil {
			return err
		}
		c := rec.Conversation
		if err := fn(c); err != nil {
			return err
		}
		b := &pgx.Batch{}
		c.UpdateTime = timestamppb.Now()
		b.Queue(`UPDATE conversations SET title = $2, archived = $3, repo = $4, update_time = $5 WHERE id = $1`,
			c.Id, c.Title, c.Archived, c.Repo, c.UpdateTime.AsTime())
		if err := conversationEvent(b, c, &agentv1.WatchConversationResponse{Type: agentv1.ConversationEventType_CONVERSATION_EVENT_TYPE_UPDATED,
			Payload: &agentv1.WatchConversationResponse_Conversation{Conversation: c}}); err != nil {
			return err
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		out = c
		return nil
	})
	return out, err
}

// DeleteConversation deletes owner's conversation id with its messages, replies and links,
// with a DELETED event, and returns the reply that was running ("" for none).
func (s *Store) DeleteConversation(ctx context.Context, owner, id string) (string, error) {
	var active string
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		rec, err := lockConversation(ctx, tx, owner, id)
		if err != nil {
			return err
		}
		active = rec.ActiveReplyId
		b := &pgx.Batch{}
		b.Queue(`DELETE FROM conversations WHERE id = $1`, id)
		if err := conversationEvent(b, rec.Conversation, &agentv1.WatchConversationResponse{Type: agentv1.ConversationEventType_CONVERSATION_EVENT_TYPE_DELETED,
			Payload: &agentv1.WatchConversationResponse_Conversation{Conversation: rec.Conversation}}); err != nil {
			return err
		}
		return tx.SendBatch(ctx, b).Close()
	})
	return active, err
}

// ConversationWatchState reports whether owner's conversation id exists, for a watch of it:
// errs.ErrNotFound when it does not (or is someone else's). A conversation never finishes.
func (s *Store) ConversationWatchState(ctx context.Context, owner, id string) (bool, error) {
	var one int
	err := s.pool.QueryRow(ctx, `SELECT 1 FROM conversations WHERE id = $1 AND owner_id = $2`, id, owner).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		// A deleted conversation's watch replays up to its DELETED event; one that never
		// existed is NOT_FOUND.
		var deleted bool
		if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM events WHERE stream = $1 AND aggregate_id = $2 AND owner_id = $3 AND type = $4)`,
			ChatStream, id, owner, protoenum.Name(agentv1.ConversationEventType_CONVERSATION_EVENT_TYPE_DELETED, "CONVERSATION_EVENT_TYPE_")).Scan(&deleted); err != nil {
			return false, err
		}
		if deleted {
			return true, nil
		}
		return false, fmt.Errorf("conversation %s: %w", id, errs.ErrNotFound)
	}
	return false, err
}

// ConversationEnds reports whether an event ends a watch of its conversation.
func ConversationEnds(e *agentv1.WatchConversationResponse) bool {
	return e.Type == agentv1.ConversationEventType_CONVERSATION_EVENT_TYPE_DELETED
}

// ConversationWatchHandler is the conversation stream's Watch handler.
func (s *Store) ConversationWatchHandler() *events.Handler[*agentv1.WatchConversationResponse] {
	return &events.Handler[*agentv1.WatchConversationResponse]{
		Hub: s.hub, Stream: ChatStream,
		Decode: func(e events.Event) (*agentv1.WatchConversationResponse, error) {
			resp := &agentv1.WatchConversationResponse{}
			if err := jsonIn.Unmarshal(e.Payload, resp); err != nil {
				return nil, fmt.Errorf("store: conversation event %d: decode: %w", e.ID, err)
			}
			resp.Id, resp.Time = e.ID, timestamppb.New(e.CreateTime)
			return resp, nil
		},
		Heartbeat: func(hb *typev1.Heartbeat) *agentv1.WatchConversationResponse {
			return &agentv1.WatchConversationResponse{Time: hb.Time, Payload: &agentv1.WatchConversationResponse_Heartbeat{Heartbeat: hb}}
		},
	}
}

// Reply record.

const replyColumns = `id::text, conversation_id::text, owner_id, message_id::text, status, status_reason, model, rounds, usage,
	create_time, end_time, scopes`

// ReplyRecord is a reply with what only the agent needs.
type ReplyRecord struct {
	*agentv1.Reply
	OwnerID string
	// Model is the registry model asked for ("" lets the policy choose).
	Model string
	// Scopes are those of the API key that sent the message (none: a full login): the
	// reply's tools may do no more.
	Scopes []string
}

func scanReply(row pgx.Row) (*ReplyRecord, error) {
	var (
		r       = &agentv1.Reply{}
		rec     = &ReplyRecord{Reply: r}
		status  string
		use     []byte
		created time.Time
		ended   *time.Time
	)
	if err := row.Scan(&r.Id, &r.ConversationId, &rec.OwnerID, &r.MessageId, &status, &r.StatusReason, &rec.Model, &r.Rounds, &use,
		&created, &ended, &rec.Scopes); err != nil {
		return nil, err
	}
	r.Status = replyStatuses[status]
	r.CreateTime = timestamppb.New(created)
	if ended != nil {
		r.EndTime = timestamppb.New(*ended)
	}
	r.Usage = &typev1.Usage{}
	if len(use) > 0 {
		if err := proto.Unmarshal(use, r.Usage); err != nil {
			return nil, fmt.Errorf("store: reply %s usage: %w", r.Id, err)
		}
	}
	return rec, nil
}

// GetReply returns reply id of owner's conversation conv.
func (s *Store) GetReply(ctx context.Context, owner, conv, id string) (*ReplyRecord, error) {
	rec, err := scanReply(s.pool.QueryRow(ctx, `SELECT `+replyColumns+` FROM conversation_replies WHERE id = $1 AND conversation_id = $2 AND owner_id = $3`,
		id, conv, owner))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errs.NotFound("reply", id)
	}
	return rec, err
}

// Messages.

// insertMessages queues the inserts of msgs (ids, seqs and times set here) into conversation
// c after its last message, the conversation's new last seq and update time, and a
// MESSAGE_ADDED event per message; a notice's deliveries to the owner's integrations are
// queued too, unless the owner's preferences turned its moment off.
func insertMessages(b *pgx.Batch, c *agentv1.Conversation, last *int64, msgs []*agentv1.ConversationMessage, requestID string, moment Moment) error {
	now := timestamppb.Now()
	for _, m := range msgs {
		*last++
		m.Id, m.ConversationId, m.Seq, m.CreateTime = uuid.NewString(), c.Id, *last, now
		doc, err := proto.Marshal(m)
		if err != nil {
			return err
		}
		var reply any
		if m.ReplyId != "" {
			reply = m.ReplyId
		}
		rid := ""
		if m.Role == agentv1.ChatRole_CHAT_ROLE_USER || m.Role == agentv1.ChatRole_CHAT_ROLE_SYSTEM {
			rid = requestID
		}
		b.Queue(`INSERT INTO conversation_messages (id, conversation_id, seq, role, reply_id, request_id, message, create_time)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, m.Id, c.Id, m.Seq, roleNames[m.Role], reply, rid, doc, now.AsTime())
		if m.Role == agentv1.ChatRole_CHAT_ROLE_SYSTEM {
			queueDeliveries(b, c, m, moment)
		}
		if err := conversationEvent(b, c, &agentv1.WatchConversationResponse{Type: agentv1.ConversationEventType_CONVERSATION_EVENT_TYPE_MESSAGE_ADDED,
			Payload: &agentv1.WatchConversationResponse_Message{Message: withoutContent(m)}}); err != nil {
			return err
		}
	}
	return nil
}

// withoutContent is m with its attachments' bytes left out (listings and events).
func withoutContent(m *agentv1.ConversationMessage) *agentv1.ConversationMessage {
	if len(m.Attachments) == 0 {
		return m
	}
	out := proto.Clone(m).(*agentv1.ConversationMessage)
	for _, a := range out.Attachments {
		a.Content = nil
	}
	return out
}

// SendMessage stores the person's message m in owner's conversation conv and starts its
// reply (RUNNING, enqueued by enqueue in the same transaction). A retry with requestID
// returns the first message and its reply with created false. An archived conversation,
// or one with a reply running, is FAILED_PRECONDITION.
func (s *Store) SendMessage(ctx context.Context, owner, conv string, m *agentv1.ConversationMessage, requestID, model string, scopes []string,
	enqueue func(ctx context.Context, tx pgx.Tx, replyID string) error) (msg *agentv1.ConversationMessage, reply *ReplyRecord, created bool, err error) {
	err = db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		rec, err := lockConversation(ctx, tx, owner, conv)
		if err != nil {
			return err
		}
		if requestID != "" {
			var doc []byte
			err := tx.QueryRow(ctx, `SELECT message FROM conversation_messages WHERE conversation_id = $1 AND request_id = $2`, conv, requestID).Scan(&doc)
			switch {
			case err == nil:
				msg = &agentv1.ConversationMessage{}
				if err := proto.Unmarshal(doc, msg); err != nil {
					return err
				}
				if reply, err = scanReply(tx.QueryRow(ctx, `SELECT `+replyColumns+` FROM conversation_replies WHERE message_id = $1`, msg.Id)); err != nil {
					return err
				}
				msg = withoutContent(msg)
				return nil
			case !errors.Is(err, pgx.ErrNoRows):
				return err
			}
		}
		c := rec.Conversation
		switch {
		case c.Archived:
			return errs.Precondition("conversation %s is archived; unarchive it (UpdateConversation) to write in it", c.Id)
		case c.ActiveReplyId != "":
			return errs.Precondition("conversation %s has a reply running (%s); wait for it or cancel it (CancelReply)", c.Id, c.ActiveReplyId)
		}
		replyID := uuid.NewString()
		m = proto.Clone(m).(*agentv1.ConversationMessage)
		m.Role, m.Author, m.ReplyId = agentv1.ChatRole_CHAT_ROLE_USER, owner, replyID
		last := int64(c.MessageCount)
		b := &pgx.Batch{}
		if err := insertMessages(b, c, &last, []*agentv1.ConversationMessage{m}, requestID, MomentNone); err != nil {
			return err
		}
		title := c.Title
		if title == "" {
			title = TitleFrom(m)
		}
		reply = &ReplyRecord{Reply: &agentv1.Reply{Id: replyID, ConversationId: c.Id, MessageId: m.Id, Status: agentv1.ReplyStatus_REPLY_STATUS_RUNNING,
			Usage: &typev1.Usage{}, CreateTime: m.CreateTime}, OwnerID: owner, Model: model, Scopes: scopes}
		if scopes == nil {
			scopes = []string{}
		}
		b.Queue(`INSERT INTO conversation_replies (id, conversation_id, owner_id, message_id, status, model, create_time, scopes)
			VALUES ($1, $2, $3, $4, 'running', $5, $6, $7)`, replyID, c.Id, owner, m.Id, model, m.CreateTime.AsTime(), scopes)
		b.Queue(`UPDATE conversations SET last_seq = $2, active_reply_id = $3, title = $4, update_time = $5 WHERE id = $1`,
			c.Id, last, replyID, title, m.CreateTime.AsTime())
		if err := conversationEvent(b, c, &agentv1.WatchConversationResponse{Type: agentv1.ConversationEventType_CONVERSATION_EVENT_TYPE_REPLY_STARTED,
			Payload: &agentv1.WatchConversationResponse_Reply{Reply: reply.Reply}}); err != nil {
			return err
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			if db.IsUniqueViolation(err) {
				return fmt.Errorf("a SendMessage with request_id %q is in progress; retry: %w", requestID, errs.ErrConflict)
			}
			return err
		}
		if err := enqueue(ctx, tx, replyID); err != nil {
			return err
		}
		msg, created = withoutContent(m), true
		return nil
	})
	return msg, reply, created, err
}

// TitleFrom is a conversation's title taken from its first message: its first line that is
// not blank, cut to 80 bytes.
func TitleFrom(m *agentv1.ConversationMessage) string {
	for line := range strings.Lines(m.Text) {
		if line = strings.TrimSpace(line); line != "" {
			return validate.Truncate(line, 80)
		}
	}
	if len(m.Attachments) > 0 {
		return validate.Truncate(m.Attachments[0].Name, 80)
	}
	return "Conversation"
}

// ListMessages returns a page of owner's conversation conv's messages, the newest first,
// attachments without their bytes.
func (s *Store) ListMessages(ctx context.Context, owner, conv string, size int, token string) ([]*agentv1.ConversationMessage, string, error) {
	if _, err := s.GetConversation(ctx, owner, conv); err != nil {
		return nil, "", err
	}
	before := int64(-1)
	if token != "" {
		parts, err := validate.DecodePageToken(token, "m1", 1, "ListMessages")
		if err != nil {
			return nil, "", err
		}
		if before, err = strconv.ParseInt(parts[0], 10, 64); err != nil || before < 1 {
			return nil, "", validate.BadPageToken("ListMessages")
		}
	}
	rows, err := s.pool.Query(ctx, `SELECT message FROM conversation_messages WHERE conversation_id = $1 AND ($2 < 0 OR seq < $2)
		ORDER BY seq DESC LIMIT $3`, conv, before, size+1)
	if err != nil {
		return nil, "", err
	}
	msgs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*agentv1.ConversationMessage, error) {
		var doc []byte
		if err := row.Scan(&doc); err != nil {
			return nil, err
		}
		m := &agentv1.ConversationMessage{}
		if err := proto.Unmarshal(doc, m); err != nil {
			return nil, err
		}
		return withoutContent(m), nil
	})
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(msgs) > size {
		msgs = msgs[:size]
		next = validate.EncodePageToken("m1", strconv.FormatInt(msgs[size-1].Seq, 10))
	}
	return msgs, next, nil
}

// History returns conversation conv's messages after seq after, oldest first, with their
// attachments' bytes: what the model is sent.
func (s *Store) History(ctx context.Context, conv string, after int64) ([]*agentv1.ConversationMessage, error) {
	rows, err := s.pool.Query(ctx, `SELECT message FROM conversation_messages WHERE conversation_id = $1 AND seq > $2 ORDER BY seq`, conv, after)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*agentv1.ConversationMessage, error) {
		var doc []byte
		if err := row.Scan(&doc); err != nil {
			return nil, err
		}
		m := &agentv1.ConversationMessage{}
		return m, proto.Unmarshal(doc, m)
	})
}

// Reply runs.

// ClaimReply claims reply id for token and returns it with its conversation; ok is false
// when the reply is not running or another live runner holds it.
func (s *Store) ClaimReply(ctx context.Context, id, token string, expiry time.Duration) (*ReplyRecord, *ConversationRecord, bool, error) {
	var (
		reply *ReplyRecord
		conv  *ConversationRecord
		ok    bool
	)
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		if ok, err = s.ReplyLeases().Claim(ctx, tx, id, token, expiry); err != nil || !ok {
			return err
		}
		if reply, err = scanReply(tx.QueryRow(ctx, `SELECT `+replyColumns+` FROM conversation_replies WHERE id = $1`, id)); err != nil {
			return err
		}
		conv, err = scanConversation(tx.QueryRow(ctx, `SELECT `+conversationColumns+` FROM conversations WHERE id = $1`, reply.ConversationId))
		return err
	})
	return reply, conv, ok, err
}

// fenceReply locks reply id's row and its conversation's in tx if token holds the reply's
// lease; else ErrLeaseLost.
func (s *Store) fenceReply(ctx context.Context, tx pgx.Tx, id, token string) (*ConversationRecord, error) {
	if _, err := s.ReplyLeases().Fence(ctx, tx, id, token); err != nil {
		return nil, err
	}
	var conv string
	if err := tx.QueryRow(ctx, `SELECT conversation_id::text FROM conversation_replies WHERE id = $1`, id).Scan(&conv); err != nil {
		return nil, err
	}
	return lockConversation(ctx, tx, "", conv)
}

// ReplyStep is what one step of a reply's run writes.
type ReplyStep struct {
	// Messages are added to the conversation, in order.
	Messages []*agentv1.ConversationMessage
	// Usage is added to the reply's and the conversation's.
	Usage *typev1.Usage
	// Round counts a model call.
	Round bool
	// End, when set, ends the reply in this status (ReplyCompleted, ReplyFailed) with
	// Reason.
	End    string
	Reason string
	// Summary, when set, replaces the conversation's summary, covering up to SummarySeq.
	Summary    string
	SummarySeq int64
}

// ReplyWrite writes one step of reply id's run, fenced by its lease token, and returns the
// reply as it now is.
func (s *Store) ReplyWrite(ctx context.Context, id, token string, st ReplyStep) (*agentv1.Reply, error) {
	var out *agentv1.Reply
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		conv, err := s.fenceReply(ctx, tx, id, token)
		if err != nil {
			return err
		}
		out, err = s.replyStep(ctx, tx, conv, id, st)
		return err
	})
	return out, err
}

// replyStep writes st of reply id in conversation conv, locked in tx.
func (s *Store) replyStep(ctx context.Context, tx pgx.Tx, conv *ConversationRecord, id string, st ReplyStep) (*agentv1.Reply, error) {
	rec, err := scanReply(tx.QueryRow(ctx, `SELECT `+replyColumns+` FROM conversation_replies WHERE id = $1`, id))
	if err != nil {
		return nil, err
	}
	r := rec.Reply
	c := conv.Conversation
	last := int64(c.MessageCount)
	b := &pgx.Batch{}
	if err := insertMessages(b, c, &last, st.Messages, "", MomentNone); err != nil {
		return nil, err
	}
	if st.Usage != nil {
		r.Usage = usage.Add(r.Usage, st.Usage)
		c.Usage = usage.Add(c.Usage, st.Usage)
	}
	if st.Round {
		r.Rounds++
	}
	rUse, err := proto.Marshal(r.Usage)
	if err != nil {
		return nil, err
	}
	cUse, err := proto.Marshal(c.Usage)
	if err != nil {
		return nil, err
	}
	status, active := ReplyRunning, any(id)
	var ended any
	if st.End != "" {
		status, active, r.StatusReason = st.End, nil, st.Reason
		r.Status, r.EndTime = replyStatuses[st.End], timestamppb.Now()
		ended = r.EndTime.AsTime()
	}
	b.Queue(`UPDATE conversation_replies SET rounds = $2, usage = $3, status = $4, status_reason = $5, end_time = $6, update_time = now(),
		lease_id = CASE WHEN $4 = 'running' THEN lease_id END, lease_time = CASE WHEN $4 = 'running' THEN lease_time END
		WHERE id = $1`, id, r.Rounds, rUse, status, r.StatusReason, ended)
	summary, summarySeq := conv.Summary, conv.SummarySeq
	if st.Summary != "" {
		summary, summarySeq = st.Summary, st.SummarySeq
	}
	b.Queue(`UPDATE conversations SET last_seq = $2, usage = $3, active_reply_id = $4, summary = $5, summary_seq = $6, update_time = now()
		WHERE id = $1`, c.Id, last, cUse, active, summary, summarySeq)
	if st.End != "" {
		if err := conversationEvent(b, c, &agentv1.WatchConversationResponse{Type: agentv1.ConversationEventType_CONVERSATION_EVENT_TYPE_REPLY_ENDED,
			Payload: &agentv1.WatchConversationResponse_Reply{Reply: r}}); err != nil {
			return nil, err
		}
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	return r, nil
}

// CancelReply cancels owner's reply id of conversation conv ("" for the running one); a
// reply that is not running is FAILED_PRECONDITION.
func (s *Store) CancelReply(ctx context.Context, owner, conv, id, reason string) (*agentv1.Reply, error) {
	var out *agentv1.Reply
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		c, err := lockConversation(ctx, tx, owner, conv)
		if err != nil {
			return err
		}
		if id == "" {
			if id = c.ActiveReplyId; id == "" {
				return errs.Precondition("conversation %s has no reply running", conv)
			}
		}
		rec, err := scanReply(tx.QueryRow(ctx, `SELECT `+replyColumns+` FROM conversation_replies WHERE id = $1 AND conversation_id = $2 FOR UPDATE`, id, conv))
		if errors.Is(err, pgx.ErrNoRows) {
			return errs.NotFound("reply", id)
		}
		if err != nil {
			return err
		}
		if rec.Status != agentv1.ReplyStatus_REPLY_STATUS_RUNNING {
			return errs.Precondition("reply %s is %s; only a running reply can be cancelled", id, ReplyStatusName(rec.Status))
		}
		out, err = s.replyStep(ctx, tx, c, id, ReplyStep{End: ReplyCancelled, Reason: reason})
		return err
	})
	return out, err
}

// ReplyStatusName is the stored name of st.
func ReplyStatusName(st agentv1.ReplyStatus) string {
	for name, v := range replyStatuses {
		if v == st {
			return name
		}
	}
	return "unknown"
}

// AddIncomplete adds the text a cancelled reply id had streamed as an incomplete assistant
// message, once: a reply that is not cancelled, or has one already, is left as it is.
func (s *Store) AddIncomplete(ctx context.Context, id string, m *agentv1.ConversationMessage) error {
	return db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		var (
			conv   string
			status string
			has    bool
		)
		err := tx.QueryRow(ctx, `SELECT conversation_id::text, status,
			EXISTS (SELECT 1 FROM conversation_messages WHERE reply_id = $1 AND role = 'assistant' AND seq > (
				SELECT coalesce(max(seq), 0) FROM conversation_messages WHERE reply_id = $1 AND role <> 'assistant'))
			FROM conversation_replies WHERE id = $1 FOR UPDATE`, id).Scan(&conv, &status, &has)
		if errors.Is(err, pgx.ErrNoRows) || status != ReplyCancelled || has {
			return nil
		}
		if err != nil {
			return err
		}
		c, err := lockConversation(ctx, tx, "", conv)
		if err != nil {
			return err
		}
		last := int64(c.MessageCount)
		b := &pgx.Batch{}
		m.ReplyId, m.Incomplete = id, true
		if err := insertMessages(b, c.Conversation, &last, []*agentv1.ConversationMessage{m}, "", MomentNone); err != nil {
			return err
		}
		b.Queue(`UPDATE conversations SET last_seq = $2, update_time = now() WHERE id = $1`, c.Id, last)
		return tx.SendBatch(ctx, b).Close()
	})
}

// AddNoticeOnce adds a notice (a SYSTEM message) to conversation conv unless one with key
// was added already (or the conversation is gone). moment is the job's moment it tells of:
// the notice goes to the owner's integrations unless their preferences turned it off (the
// conversation has it either way).
func (s *Store) AddNoticeOnce(ctx context.Context, conv, key string, m *agentv1.ConversationMessage, moment Moment) error {
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		c, err := lockConversation(ctx, tx, "", conv)
		if err != nil {
			return err
		}
		var dup bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM conversation_messages WHERE conversation_id = $1 AND request_id = $2)`,
			conv, key).Scan(&dup); err != nil || dup {
			return err
		}
		m.Role, m.Author = agentv1.ChatRole_CHAT_ROLE_SYSTEM, "thefold"
		last := int64(c.MessageCount)
		b := &pgx.Batch{}
		if err := insertMessages(b, c.Conversation, &last, []*agentv1.ConversationMessage{m}, key, moment); err != nil {
			return err
		}
		b.Queue(`UPDATE conversations SET last_seq = $2, update_time = now() WHERE id = $1`, c.Id, last)
		return tx.SendBatch(ctx, b).Close()
	})
	if errors.Is(err, errs.ErrNotFound) || db.IsUniqueViolation(err) {
		return nil
	}
	return err
}

// NotifyCursor is the last event the notifier handled; at the first start, the latest event
// (what happened before chat existed is not news).
func (s *Store) NotifyCursor(ctx context.Context) (int64, error) {
	var after int64
	err := s.pool.QueryRow(ctx, `SELECT after_id FROM conversation_notify`).Scan(&after)
	if errors.Is(err, pgx.ErrNoRows) {
		if after, err = events.Latest(ctx, s.pool); err != nil {
			return 0, err
		}
		return after, s.SetNotifyCursor(ctx, after)
	}
	return after, err
}

// SetNotifyCursor records that the notifier handled the events up to after.
func (s *Store) SetNotifyCursor(ctx context.Context, after int64) error {
	return db.LazyExec(ctx, s.pool, `INSERT INTO conversation_notify (one, after_id) VALUES (true, $1)
		ON CONFLICT (one) DO UPDATE SET after_id = greatest(conversation_notify.after_id, $1)`, after)
}

// AddNotice adds a notice (a SYSTEM message) to conversation conv, whoever runs in it.
func (s *Store) AddNotice(ctx context.Context, conv string, m *agentv1.ConversationMessage) error {
	return db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		c, err := lockConversation(ctx, tx, "", conv)
		if err != nil {
			return err
		}
		m.Role, m.Author = agentv1.ChatRole_CHAT_ROLE_SYSTEM, "thefold"
		last := int64(c.MessageCount)
		b := &pgx.Batch{}
		if err := insertMessages(b, c.Conversation, &last, []*agentv1.ConversationMessage{m}, "", MomentNone); err != nil {
			return err
		}
		b.Queue(`UPDATE conversations SET last_seq = $2, update_time = now() WHERE id = $1`, c.Id, last)
		return tx.SendBatch(ctx, b).Close()
	})
}

// AddDelta appends a TEXT_DELTA event of reply id to conversation c without waiting for its
// WAL flush: a delta lost in a crash of the database costs nothing, the reply's message
// (durable) holds the whole text.
func (s *Store) AddDelta(ctx context.Context, conv, owner, reply, text string) error {
	c := &agentv1.Conversation{Id: conv, OwnerId: owner}
	b := &pgx.Batch{}
	b.Queue(`SELECT set_config('synchronous_commit', 'off', true)`)
	if err := conversationEvent(b, c, &agentv1.WatchConversationResponse{Type: agentv1.ConversationEventType_CONVERSATION_EVENT_TYPE_TEXT_DELTA,
		Payload: &agentv1.WatchConversationResponse_Delta{Delta: &agentv1.TextDelta{ReplyId: reply, Text: text}}}); err != nil {
		return err
	}
	return s.pool.SendBatch(ctx, b).Close()
}

// Links.

// LinkConversation records that conversation conv started the job or project target (kind
// "job" or "project"), so its events come back into the conversation.
func (s *Store) LinkConversation(ctx context.Context, kind, target, conv string) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO conversation_links (kind, target_id, conversation_id) VALUES ($1, $2, $3)
		ON CONFLICT (kind, target_id) DO NOTHING`, kind, target, conv)
	return err
}

// LinkedConversation is the conversation that started the job or project target; "" for
// none.
func (s *Store) LinkedConversation(ctx context.Context, kind, target string) (string, error) {
	var conv string
	err := s.pool.QueryRow(ctx, `SELECT conversation_id::text FROM conversation_links WHERE kind = $1 AND target_id = $2`, kind, target).Scan(&conv)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return conv, err
}
