package linear

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// SignatureHeader is the header carrying a webhook's signature: the hex HMAC-SHA256 of
// the raw body under the webhook's signing secret.
const SignatureHeader = "Linear-Signature"

// WebhookTolerance is how far a webhook's webhookTimestamp may be from now, either way;
// it is the window Linear's own SDK accepts. Older deliveries are refused as replays.
const WebhookTolerance = 60 * time.Second

// Webhook verification failures, distinct so a handler can log a forged delivery apart
// from a late one.
var (
	ErrBadSignature = errors.New("linear: webhook signature does not match the body")
	ErrStaleWebhook = errors.New("linear: webhook timestamp outside the accepted window")
)

// Webhook payload types (WebhookPayload.Type) the sync handles.
const (
	WebhookTypeIssue         = "Issue"
	WebhookTypeComment       = "Comment"
	WebhookTypeIssueRelation = "IssueRelation"
)

// WebhookPayload is a verified webhook delivery. Data is the changed entity, decoded by
// type (IssueData for "Issue"); UpdatedFrom holds the previous values of what an update
// changed and is empty for other actions.
type WebhookPayload struct {
	// Action is "create", "update" or "remove".
	Action         string          `json:"action"`
	Type           string          `json:"type"`
	Data           json.RawMessage `json:"data"`
	URL            string          `json:"url"`
	UpdatedFrom    json.RawMessage `json:"updatedFrom"`
	CreatedAt      time.Time       `json:"createdAt"`
	OrganizationID string          `json:"organizationId"`
	WebhookID      string          `json:"webhookId"`
	// WebhookTimestamp is when Linear sent the delivery (webhookTimestamp, epoch ms).
	WebhookTimestamp time.Time `json:"-"`
}

// VerifyWebhook checks a delivery and returns its payload. body is the raw request body
// (before any JSON parsing), signature the Linear-Signature header, now the current time.
// A signature that does not match is ErrBadSignature; a webhookTimestamp missing or more
// than WebhookTolerance from now is ErrStaleWebhook. The signature is compared in
// constant time before the body is parsed.
func VerifyWebhook(secret string, body []byte, signature string, now time.Time) (*WebhookPayload, error) {
	if secret == "" {
		return nil, errors.New("linear: no webhook secret configured")
	}
	if !validSignature(secret, body, signature) {
		return nil, ErrBadSignature
	}
	payload, err := parseWebhook(body)
	if err != nil {
		return nil, err
	}
	if age := now.Sub(payload.WebhookTimestamp); payload.WebhookTimestamp.IsZero() || age > WebhookTolerance || age < -WebhookTolerance {
		return nil, ErrStaleWebhook
	}
	return payload, nil
}

// validSignature reports whether signature is the hex HMAC-SHA256 of body under secret.
func validSignature(secret string, body []byte, signature string) bool {
	got, err := hex.DecodeString(signature)
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return hmac.Equal(got, mac.Sum(nil))
}

// parseWebhook decodes a payload; webhookTimestamp is a Float of milliseconds on the wire.
func parseWebhook(body []byte) (*WebhookPayload, error) {
	var wire struct {
		WebhookPayload
		Timestamp float64 `json:"webhookTimestamp"`
	}
	if err := json.Unmarshal(body, &wire); err != nil {
		return nil, fmt.Errorf("linear: decode webhook: %w", err)
	}
	payload := wire.WebhookPayload
	if wire.Timestamp > 0 {
		payload.WebhookTimestamp = time.UnixMilli(int64(wire.Timestamp))
	}
	return &payload, nil
}

// IssueData is the issue in an "Issue" webhook's data: its state after the change, and
// the IDs of its team and project (ProjectID is empty for an issue in no project).
type IssueData struct {
	ID          string
	Identifier  string
	Title       string
	Description string
	URL         string
	Priority    int
	UpdatedAt   time.Time
	State       WorkflowState
	TeamID      string
	ProjectID   string
}

// IssueData decodes Data as an issue; it is an error for a payload of another type.
func (p *WebhookPayload) IssueData() (*IssueData, error) {
	if p.Type != WebhookTypeIssue {
		return nil, fmt.Errorf("linear: webhook of type %q carries no issue", p.Type)
	}
	var wire struct {
		ID          string        `json:"id"`
		Identifier  string        `json:"identifier"`
		Title       string        `json:"title"`
		Description string        `json:"description"`
		URL         string        `json:"url"`
		Priority    float64       `json:"priority"`
		UpdatedAt   time.Time     `json:"updatedAt"`
		State       WorkflowState `json:"state"`
		TeamID      string        `json:"teamId"`
		ProjectID   string        `json:"projectId"`
	}
	if err := json.Unmarshal(p.Data, &wire); err != nil {
		return nil, fmt.Errorf("linear: decode webhook issue: %w", err)
	}
	return &IssueData{
		ID: wire.ID, Identifier: wire.Identifier, Title: wire.Title, Description: wire.Description,
		URL: wire.URL, Priority: int(wire.Priority), UpdatedAt: wire.UpdatedAt, State: wire.State,
		TeamID: wire.TeamID, ProjectID: wire.ProjectID,
	}, nil
}
