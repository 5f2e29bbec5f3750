package fakelinear

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"
)

// SignWebhook returns the Linear-Signature header value for a webhook body: the hex
// HMAC-SHA256 of the raw body under the webhook's signing secret.
func SignWebhook(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}

// WebhookPayload returns the body Linear sends for an "Issue" webhook with action
// ("create", "update" or "remove") on issue, sent now. It has no updatedFrom: the fake
// keeps no history of what an update changed.
func WebhookPayload(action string, issue Issue) []byte {
	now := time.Now()
	data := map[string]any{
		"id":          issue.ID,
		"identifier":  issue.Identifier,
		"title":       issue.Title,
		"description": issue.Description,
		"url":         issue.URL,
		"priority":    issue.Priority,
		"createdAt":   dateTime{issue.CreatedAt},
		"updatedAt":   dateTime{issue.UpdatedAt},
		"stateId":     issue.State.ID,
		"state":       map[string]any{"id": issue.State.ID, "name": issue.State.Name, "type": issue.State.Type},
		"teamId":      issue.TeamID,
	}
	if issue.ProjectID != "" {
		data["projectId"] = issue.ProjectID
	}
	body, err := json.Marshal(map[string]any{
		"action":           action,
		"type":             "Issue",
		"createdAt":        dateTime{now},
		"data":             data,
		"url":              issue.URL,
		"organizationId":   OrganizationID,
		"webhookTimestamp": now.UnixMilli(),
		"webhookId":        newID(),
	})
	if err != nil {
		panic("fakelinear: encode webhook payload: " + err.Error())
	}
	return body
}
