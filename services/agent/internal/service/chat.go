package service

import (
	"bytes"
	"context"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/errs"
	"github.com/thefold/thefold/pkg/events"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	"github.com/thefold/thefold/pkg/validate"

	"github.com/thefold/thefold/services/agent/internal/store"
)

// Limits of chat requests.
const (
	maxTitle           = 200
	maxMessageText     = 32 << 10
	maxAttachments     = 4
	maxTextAttachment  = 256 << 10
	maxImageAttachment = 3 << 20
	maxAttachmentName  = 255
)

// imageTypes are the image media types a message may carry.
var imageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// textTypes are the non-text/* media types taken as text.
var textTypes = map[string]bool{"application/json": true, "application/yaml": true, "application/x-yaml": true, "application/xml": true,
	"application/toml": true, "application/javascript": true, "application/sql": true}

// chat is the ChatService side of the server.
type chat struct {
	agentv1.UnimplementedChatServiceServer
	s     *Server
	watch *events.Handler[*agentv1.WatchConversationResponse]
	// replies starts reply runs; stop ends one this process runs.
	replies Queue
	stop    Stopper
}

// Chat is the ChatService side of the server: replies run through replies, and stop ends
// one this process runs.
func (s *Server) Chat(replies Queue, stop Stopper) agentv1.ChatServiceServer {
	c := &chat{s: s, replies: replies, stop: stop}
	c.watch = s.store.ConversationWatchHandler()
	c.watch.Every, c.watch.Watches = s.o.Heartbeat, s.watch.Watches
	return c
}

var _ agentv1.ChatServiceServer = (*chat)(nil)

// callerAndConversation is the caller and the conversation id named in field.
func callerAndConversation(ctx context.Context, field, id string) (owner, conv string, err error) {
	if owner, err = caller(ctx); err != nil {
		return "", "", err
	}
	conv, err = validate.UUID(field, id, true)
	return owner, conv, err
}

// checkRepo checks that repo ("" for none) names a repository the caller may use.
func (c *chat) checkRepo(ctx context.Context, field, repo string) error {
	if repo == "" {
		return nil
	}
	if err := validate.Repo(field, repo, true); err != nil {
		return err
	}
	if c.s.o.Repos == nil {
		return nil
	}
	_, err := c.s.o.Repos.GetRepo(ctx, &githubv1.GetRepoRequest{Repo: repo})
	if status.Code(err) == codes.NotFound {
		return errs.NotFound("repository", repo)
	}
	return err
}

func checkTitle(field, title string) (string, error) {
	title = strings.TrimSpace(title)
	if err := validate.MaxLen(field, title, maxTitle); err != nil {
		return "", err
	}
	if strings.ContainsAny(title, "\n\r") {
		return "", errs.Invalid(field, "must be one line")
	}
	return title, nil
}

// CreateConversation starts an empty conversation.
func (c *chat) CreateConversation(ctx context.Context, req *agentv1.CreateConversationRequest) (*agentv1.CreateConversationResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	if req.RequestId != "" {
		if err := validate.RequestID("request_id", req.RequestId); err != nil {
			return nil, err
		}
	}
	title, err := checkTitle("title", req.Title)
	if err != nil {
		return nil, err
	}
	if err := c.checkRepo(ctx, "repo", req.Repo); err != nil {
		return nil, err
	}
	conv, err := c.s.store.CreateConversation(ctx, &agentv1.Conversation{OwnerId: owner, Title: title, Repo: req.Repo}, req.RequestId)
	if err != nil {
		return nil, err
	}
	return &agentv1.CreateConversationResponse{Conversation: conv}, nil
}

// GetConversation returns one of the caller's conversations.
func (c *chat) GetConversation(ctx context.Context, req *agentv1.GetConversationRequest) (*agentv1.GetConversationResponse, error) {
	owner, id, err := callerAndConversation(ctx, "id", req.Id)
	if err != nil {
		return nil, err
	}
	rec, err := c.s.store.GetConversation(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	return &agentv1.GetConversationResponse{Conversation: rec.Conversation}, nil
}

// ListConversations lists the caller's conversations, the most recently active first.
func (c *chat) ListConversations(ctx context.Context, req *agentv1.ListConversationsRequest) (*agentv1.ListConversationsResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	size, err := validate.PageSize(req.PageSize, 50, 200)
	if err != nil {
		return nil, err
	}
	out, next, err := c.s.store.ListConversations(ctx, owner, req.IncludeArchived, size, req.PageToken)
	if err != nil {
		return nil, err
	}
	return &agentv1.ListConversationsResponse{Conversations: out, NextPageToken: next}, nil
}

// conversationPaths are UpdateConversation's updatable paths.
var conversationPaths = []string{"title", "archived", "repo"}

// UpdateConversation renames, archives or re-points a conversation.
func (c *chat) UpdateConversation(ctx context.Context, req *agentv1.UpdateConversationRequest) (*agentv1.UpdateConversationResponse, error) {
	owner, id, err := callerAndConversation(ctx, "id", req.Id)
	if err != nil {
		return nil, err
	}
	if req.Conversation == nil {
		return nil, errs.Invalid("conversation", "required: the new values of the fields in update_mask")
	}
	if req.Conversation.Id != "" && req.Conversation.Id != req.Id {
		return nil, errs.Invalid("conversation.id", "must be empty or equal id")
	}
	paths, err := validate.UpdatePaths(req.UpdateMask, req.Conversation, conversationPaths)
	if err != nil {
		return nil, err
	}
	title := ""
	for _, p := range paths {
		switch p {
		case "title":
			if title, err = checkTitle("conversation.title", req.Conversation.Title); err != nil {
				return nil, err
			}
			if title == "" {
				return nil, errs.Invalid("conversation.title", "required: a conversation's title cannot be empty")
			}
		case "repo":
			if err := c.checkRepo(ctx, "conversation.repo", req.Conversation.Repo); err != nil {
				return nil, err
			}
		}
	}
	conv, err := c.s.store.UpdateConversation(ctx, owner, id, func(cv *agentv1.Conversation) error {
		for _, p := range paths {
			switch p {
			case "title":
				cv.Title = title
			case "archived":
				cv.Archived = req.Conversation.Archived
			case "repo":
				cv.Repo = req.Conversation.Repo
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &agentv1.UpdateConversationResponse{Conversation: conv}, nil
}

// DeleteConversation deletes a conversation; its running reply stops.
func (c *chat) DeleteConversation(ctx context.Context, req *agentv1.DeleteConversationRequest) (*agentv1.DeleteConversationResponse, error) {
	owner, id, err := callerAndConversation(ctx, "id", req.Id)
	if err != nil {
		return nil, err
	}
	active, err := c.s.store.DeleteConversation(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	if active != "" && c.stop != nil {
		c.stop.Stop(active)
	}
	return &agentv1.DeleteConversationResponse{}, nil
}

// ListMessages lists a conversation's messages, the newest first.
func (c *chat) ListMessages(ctx context.Context, req *agentv1.ListMessagesRequest) (*agentv1.ListMessagesResponse, error) {
	owner, id, err := callerAndConversation(ctx, "conversation_id", req.ConversationId)
	if err != nil {
		return nil, err
	}
	size, err := validate.PageSize(req.PageSize, 100, 500)
	if err != nil {
		return nil, err
	}
	msgs, next, err := c.s.store.ListMessages(ctx, owner, id, size, req.PageToken)
	if err != nil {
		return nil, err
	}
	return &agentv1.ListMessagesResponse{Messages: msgs, NextPageToken: next}, nil
}

// checkAttachment checks attachment i and returns it as stored.
func checkAttachment(i int, a *agentv1.Attachment) (*agentv1.Attachment, error) {
	field := fmt.Sprintf("attachments[%d]", i)
	name := strings.TrimSpace(a.Name)
	switch {
	case name == "":
		return nil, errs.Invalid(field+".name", "required")
	case len(name) > maxAttachmentName:
		return nil, errs.Invalid(field+".name", "at most %d bytes", maxAttachmentName)
	case strings.ContainsAny(name, "/\\\x00\n\r"):
		return nil, errs.Invalid(field+".name", "a file name, without '/', '\\' or line breaks")
	}
	mt, _, err := mime.ParseMediaType(a.MediaType)
	if err != nil {
		return nil, errs.Invalid(field+".media_type", "not a media type: %q", a.MediaType)
	}
	out := &agentv1.Attachment{Name: name, MediaType: mt, Content: a.Content, SizeBytes: int64(len(a.Content))}
	switch {
	case imageTypes[mt]:
		if len(a.Content) > maxImageAttachment {
			return nil, errs.Invalid(field+".content", "an image may be at most %d bytes (3 MiB), not %d", maxImageAttachment, len(a.Content))
		}
		if got := http.DetectContentType(a.Content); got != mt {
			return nil, errs.Invalid(field+".content", "is not a %s image (its bytes look like %s)", mt, got)
		}
	case strings.HasPrefix(mt, "text/") || textTypes[mt] || strings.HasSuffix(mt, "+json") || strings.HasSuffix(mt, "+xml"):
		if len(a.Content) > maxTextAttachment {
			return nil, errs.Invalid(field+".content", "a text attachment may be at most %d bytes (256 KiB), not %d", maxTextAttachment, len(a.Content))
		}
		if !utf8.Valid(a.Content) || bytes.IndexByte(a.Content, 0) >= 0 {
			return nil, errs.Invalid(field+".content", "a text attachment must be UTF-8 text")
		}
	default:
		return nil, errs.Invalid(field+".media_type", "%s is not taken: text (text/*, JSON, YAML, XML) or an image (png, jpeg, gif, webp)", mt)
	}
	if len(a.Content) == 0 {
		return nil, errs.Invalid(field+".content", "required: the file is empty")
	}
	return out, nil
}

// SendMessage stores the person's message and starts the reply.
func (c *chat) SendMessage(ctx context.Context, req *agentv1.SendMessageRequest) (*agentv1.SendMessageResponse, error) {
	owner, conv, err := callerAndConversation(ctx, "conversation_id", req.ConversationId)
	if err != nil {
		return nil, err
	}
	if req.RequestId != "" {
		if err := validate.RequestID("request_id", req.RequestId); err != nil {
			return nil, err
		}
	}
	if err := validate.MaxLen("text", req.Text, maxMessageText); err != nil {
		return nil, err
	}
	if strings.TrimSpace(req.Text) == "" && len(req.Attachments) == 0 {
		return nil, errs.Invalid("text", "required: what to say (or attach a file)")
	}
	if len(req.Attachments) > maxAttachments {
		return nil, errs.Invalid("attachments", "at most %d attachments per message, not %d", maxAttachments, len(req.Attachments))
	}
	if err := validate.MaxLen("model", req.Model, maxModel); err != nil {
		return nil, err
	}
	m := &agentv1.ConversationMessage{Text: req.Text}
	for i, a := range req.Attachments {
		at, err := checkAttachment(i, a)
		if err != nil {
			return nil, err
		}
		m.Attachments = append(m.Attachments, at)
	}
	model := req.Model
	if model == "" {
		// The model the owner chose for chat, if any (else the ai service selects one).
		p, err := c.s.store.GetPreferences(ctx, owner)
		if err != nil {
			return nil, err
		}
		model = p.GetDefaultModels()["chat"]
	}
	// An API key's scopes go with the reply: its tools may do no more than the key allows.
	var scopes []string
	if p, ok := auth.FromContext(ctx); ok {
		scopes = p.Scopes
	}
	msg, reply, created, err := c.s.store.SendMessage(ctx, owner, conv, m, req.RequestId, model, scopes,
		func(ctx context.Context, tx pgx.Tx, id string) error { return c.replies.Enqueue(ctx, tx, id) })
	if err != nil {
		return nil, err
	}
	if !created && msg.Text != req.Text {
		return nil, errs.Invalid("request_id", "was used for a different message")
	}
	return &agentv1.SendMessageResponse{Message: msg, Reply: reply.Reply}, nil
}

// CancelReply stops a running reply.
func (c *chat) CancelReply(ctx context.Context, req *agentv1.CancelReplyRequest) (*agentv1.CancelReplyResponse, error) {
	owner, conv, err := callerAndConversation(ctx, "conversation_id", req.ConversationId)
	if err != nil {
		return nil, err
	}
	id, err := validate.UUID("reply_id", req.ReplyId, false)
	if err != nil {
		return nil, err
	}
	reply, err := c.s.store.CancelReply(ctx, owner, conv, id, "cancelled by "+actor(owner))
	if err != nil {
		return nil, err
	}
	if c.stop != nil {
		c.stop.Stop(reply.Id)
	}
	return &agentv1.CancelReplyResponse{Reply: reply}, nil
}

// WatchConversation streams one conversation's events.
func (c *chat) WatchConversation(req *agentv1.WatchConversationRequest, stream grpc.ServerStreamingServer[agentv1.WatchConversationResponse]) error {
	ctx := stream.Context()
	owner, id, err := callerAndConversation(ctx, "id", req.Id)
	if err != nil {
		return err
	}
	w := events.Watch[*agentv1.WatchConversationResponse]{AfterID: req.AfterId, FromNow: req.FromNow, OwnerID: owner, ID: id,
		Ends:  store.ConversationEnds,
		State: func(ctx context.Context) (bool, error) { return c.s.store.ConversationWatchState(ctx, owner, id) }}
	return c.watch.Serve(ctx, w, stream.Send)
}
