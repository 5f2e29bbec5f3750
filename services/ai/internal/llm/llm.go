// Package llm is the ai service's provider-neutral view of a language model: one request
// and response shape that the Anthropic, OpenAI(-compatible) and Gemini clients translate to
// and from their SDKs, the errors they report, and the retry policy around them. Nothing here
// knows about prompts, the registry or the ledger.
package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Role is who wrote a message.
type Role string

const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
)

// BlockKind is what a content block holds.
type BlockKind int

const (
	BlockText BlockKind = iota
	// BlockToolUse is a tool call by the model (assistant messages).
	BlockToolUse
	// BlockToolResult answers a tool call (user messages).
	BlockToolResult
	// BlockImage is a picture (user messages): MediaType and Data. Only models that take
	// images are sent one; the engine replaces it by a note for the others.
	BlockImage
)

// Block is one part of a message.
type Block struct {
	Kind BlockKind
	// Text for BlockText; the result for BlockToolResult.
	Text string
	// ToolUseID: the call's id (BlockToolUse) or the id answered (BlockToolResult).
	ToolUseID string
	// ToolName of a BlockToolUse.
	ToolName string
	// Input of a BlockToolUse: a JSON object.
	Input json.RawMessage
	// IsError marks a failed BlockToolResult.
	IsError bool
	// MediaType of a BlockImage: image/png, image/jpeg, image/gif or image/webp.
	MediaType string
	// Data is a BlockImage's encoded picture (the bytes, not base64).
	Data []byte
	// Cache marks the end of a stable prefix (system, tools and messages up to and including
	// this block) that the provider may cache: an Anthropic cache_control breakpoint. Other
	// providers cache prefixes by themselves and ignore it.
	Cache bool
}

// Text returns a text block.
func Text(s string) Block { return Block{Kind: BlockText, Text: s} }

// Image returns an image block.
func Image(mediaType string, data []byte) Block {
	return Block{Kind: BlockImage, MediaType: mediaType, Data: data}
}

// Message is one turn.
type Message struct {
	Role   Role
	Blocks []Block
}

// UserText returns a user message of one text block.
func UserText(s string) Message { return Message{Role: RoleUser, Blocks: []Block{Text(s)}} }

// Segment is a part of the system prompt. Segments are sent in order; Cache marks the end of
// a stable prefix the provider may cache (Anthropic: a cache_control breakpoint after the
// segment). Anthropic takes at most 4 breakpoints per request (segments and blocks
// together): the client keeps the last 4. Providers that cache automatically (OpenAI,
// Gemini) or not at all ignore it.
type Segment struct {
	Text  string
	Cache bool
}

// Tool is a function the model may call.
type Tool struct {
	Name        string
	Description string
	// InputSchema is a JSON Schema object.
	InputSchema json.RawMessage
}

// ToolChoiceMode says whether the model must call a tool.
type ToolChoiceMode int

const (
	ToolAuto ToolChoiceMode = iota
	ToolAny
	ToolNamed
	ToolNone
)

// ToolChoice constrains tool calls; Name is for ToolNamed.
type ToolChoice struct {
	Mode ToolChoiceMode
	Name string
}

// Effort is how much a model may think before it answers: Anthropic's extended thinking,
// OpenAI's reasoning_effort, Gemini's thinking budget. Only models that support reasoning
// (the registry's supports_reasoning) are sent it; the engine clears it for the rest.
type Effort int

const (
	// EffortNone sends no reasoning setting: the model's own default.
	EffortNone Effort = iota
	EffortLow
	EffortMedium
	EffortHigh
)

// Budget is the thinking tokens an effort allows: Anthropic's budget_tokens and Gemini's
// thinkingBudget, and the room the output limit grows by for OpenAI's reasoning tokens. Every
// provider counts thinking against the output limit, so a client sends MaxTokens + Budget.
// Anthropic's minimum budget is 1024; Gemini 2.5 Flash's maximum is 24576.
func (e Effort) Budget() int {
	switch e {
	case EffortLow:
		return 2048
	case EffortMedium:
		return 8192
	case EffortHigh:
		return 16384
	}
	return 0
}

func (e Effort) String() string {
	switch e {
	case EffortNone:
		return "none"
	case EffortLow:
		return "low"
	case EffortMedium:
		return "medium"
	case EffortHigh:
		return "high"
	}
	return fmt.Sprintf("Effort(%d)", int(e))
}

// Request is one model call.
type Request struct {
	// Model is the provider's model name, e.g. "claude-sonnet-4-5".
	Model      string
	System     []Segment
	Messages   []Message
	Tools      []Tool
	ToolChoice ToolChoice
	// MaxTokens caps the reply; required by Anthropic, so clients default it (4096).
	MaxTokens     int
	Temperature   *float64
	StopSequences []string
	// JSON asks for a JSON object reply where the provider supports a JSON mode (OpenAI
	// response_format, Gemini response MIME type). Anthropic has none; the prompt asks.
	JSON bool
	// Reasoning lets the model think before it answers. MaxTokens stays the answer's room:
	// the client adds Reasoning.Budget() to the output limit it sends, since thinking counts
	// against it. The thinking is not part of Response.Text; its tokens are output tokens.
	// Anthropic and OpenAI's reasoning models refuse a temperature beside it, so their
	// clients leave Temperature out then; Anthropic also refuses thinking with a forced tool
	// choice, so its client sends none when a tool is forced.
	Reasoning Effort
}

// StopReason is why the model stopped.
type StopReason int

const (
	StopUnknown StopReason = iota
	StopEndTurn
	StopMaxTokens
	StopSequence
	StopToolUse
)

// Usage counts one call's tokens. InputTokens includes the cache-read and cache-write
// tokens (as thefold.type.v1.Usage does), whatever the provider's own convention: Anthropic
// reports them beside input_tokens, OpenAI and Gemini inside it.
type Usage struct {
	InputTokens      int64
	OutputTokens     int64
	CacheReadTokens  int64
	CacheWriteTokens int64
}

// Add returns u + v.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		InputTokens:      u.InputTokens + v.InputTokens,
		OutputTokens:     u.OutputTokens + v.OutputTokens,
		CacheReadTokens:  u.CacheReadTokens + v.CacheReadTokens,
		CacheWriteTokens: u.CacheWriteTokens + v.CacheWriteTokens,
	}
}

// Response is the model's reply.
type Response struct {
	// Text is the reply's text blocks joined.
	Text string
	// ToolUses are the BlockToolUse blocks of the reply, in order.
	ToolUses   []Block
	StopReason StopReason
	Usage      Usage
	// Model is the model name the provider reports having used.
	Model string
}

// EmbedRequest asks for one vector per text.
type EmbedRequest struct {
	Model string
	Texts []string
	// Dimensions requested; 0 uses the model's own size.
	Dimensions int
}

// EmbedResponse holds one vector per text, in order.
type EmbedResponse struct {
	Vectors [][]float32
	Usage   Usage
}

// Provider is a client of one provider account (kind, base URL, key).
type Provider interface {
	// Name is the registry provider's name, for logs and usage.
	Name() string
	Complete(ctx context.Context, req Request) (*Response, error)
	// Embed returns ErrUnsupported from providers without an embeddings API (Anthropic).
	Embed(ctx context.Context, req EmbedRequest) (*EmbedResponse, error)
}

// ErrUnsupported is returned for an operation a provider does not offer.
var ErrUnsupported = errors.New("not supported by this provider")

// ErrorKind classifies a provider failure.
type ErrorKind int

const (
	// KindUnknown is an error that could not be classified; not retried.
	KindUnknown ErrorKind = iota
	// KindRateLimited is HTTP 429.
	KindRateLimited
	// KindOverloaded is Anthropic's 529 or an "overloaded" error.
	KindOverloaded
	// KindServer is a 5xx.
	KindServer
	// KindUnavailable is a connection failure or a timeout of one attempt: the provider did
	// not answer.
	KindUnavailable
	// KindBadRequest is a 400/404/413/422: the request is wrong for this provider or model.
	KindBadRequest
	// KindAuth is 401/403: the key is missing or wrong.
	KindAuth
	// KindInvalidResponse is an answer that could not be decoded (malformed JSON).
	KindInvalidResponse
)

func (k ErrorKind) String() string {
	switch k {
	case KindRateLimited:
		return "rate limited"
	case KindOverloaded:
		return "overloaded"
	case KindServer:
		return "server error"
	case KindUnavailable:
		return "unavailable"
	case KindBadRequest:
		return "bad request"
	case KindAuth:
		return "authentication failed"
	case KindInvalidResponse:
		return "invalid response"
	default:
		return "error"
	}
}

// Error is a provider failure. Its Error text holds the provider's own message and is for
// logs only: the service shows callers a message built from Provider, Kind and Status.
type Error struct {
	Provider string
	Kind     ErrorKind
	// Status is the HTTP status, 0 when there was no answer.
	Status int
	// RetryAfter is what the provider asked to wait (retry-after / retry-after-ms), 0 if
	// it did not say.
	RetryAfter time.Duration
	Err        error
}

func (e *Error) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("%s: %s (HTTP %d): %v", e.Provider, e.Kind, e.Status, e.Err)
	}
	return fmt.Sprintf("%s: %s: %v", e.Provider, e.Kind, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Retryable reports whether the same request may succeed later: rate limits, overload,
// server errors, no answer and a garbled answer.
func (e *Error) Retryable() bool {
	switch e.Kind {
	case KindRateLimited, KindOverloaded, KindServer, KindUnavailable, KindInvalidResponse:
		return true
	}
	return false
}

// AsError returns err's *Error, if it has one.
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}
