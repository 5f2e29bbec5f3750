package e2e

import (
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// inboundWebhook is an incoming webhook on the loopback address (the mesh allows 127.0.0.1) that
// takes every post.
func inboundWebhook(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/hook"
}

// inboundIntegration connects the admin's Slack or Discord over REST and returns its id.
func inboundIntegration(t *testing.T, kind, secret, user string) string {
	t.Helper()
	code, body := rest(t, http.MethodPost, "/v1/integrations", token, map[string]any{"integration": map[string]any{
		"kind": kind, "name": "e2e", "webhook_url": inboundWebhook(t), "inbound_secret": secret, "external_user_id": user}})
	if code != http.StatusOK {
		t.Fatalf("create integration: %d %v", code, body)
	}
	in := body["integration"].(map[string]any)
	if in["inbound_configured"] != true || in["inbound_secret"] != nil || in["webhook_url"] != nil {
		t.Fatalf("integration as returned: %v", in)
	}
	id := in["id"].(string)
	// Deleted before its webhook closes: the admin's other tests' notices would be posted to
	// a closed webhook until it was disabled.
	t.Cleanup(func() { rest(t, http.MethodDelete, "/v1/integrations/"+id, token, nil) })
	return id
}

// inboundConversation is the conversation the admin's integration id keeps.
func inboundConversation(t *testing.T, id string) string {
	t.Helper()
	code, body := rest(t, http.MethodGet, "/v1/integrations?page_size=100", token, nil)
	if code != http.StatusOK {
		t.Fatalf("list integrations: %d %v", code, body)
	}
	list, _ := body["integrations"].([]any)
	for _, v := range list {
		if in := v.(map[string]any); in["id"] == id {
			conv, _ := in["conversation_id"].(string)
			return conv
		}
	}
	t.Fatalf("integration %s is not listed: %v", id, body)
	return ""
}

// inboundMessages is how many messages conversation conv holds.
func inboundMessages(t *testing.T, conv string) int {
	t.Helper()
	code, body := rest(t, http.MethodGet, "/v1/conversations/"+conv+"/messages?page_size=500", token, nil)
	if code != http.StatusOK {
		t.Fatalf("list messages: %d %v", code, body)
	}
	msgs, _ := body["messages"].([]any)
	return len(msgs)
}

// inboundPost posts body to the gateway's hook path with header and returns the answer.
func inboundPost(t *testing.T, path, body string, header map[string]string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, mesh.GatewayURL()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("%s answered %d %q %s", path, resp.StatusCode, resp.Header.Get("Content-Type"), raw)
	}
	return resp.StatusCode, out
}

// inboundAnswered waits for the conversation's reply to end and checks that it completed,
// answering text with the list_repos tool.
func inboundAnswered(t *testing.T, conv, text string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), liveness(2*time.Minute))
	defer cancel()
	evs := until(t, watchChat(t, ctx, token, conv, ""), time.Minute, "the end of the reply", replyEnded)
	var asked, listed bool
	for _, e := range evs {
		m := message(e)
		if m["role"] == "CHAT_ROLE_USER" && m["text"] == text {
			asked = true
		}
		if r, ok := m["tool_result"].(map[string]any); ok && r["name"] == "list_repos" && r["is_error"] != true {
			listed = true
		}
	}
	if r := evs[len(evs)-1].data["reply"].(map[string]any); !asked || !listed || r["status"] != "REPLY_STATUS_COMPLETED" {
		t.Fatalf("asked %v, listed %v, reply %v: %v", asked, listed, r, summary(evs))
	}
}

// A person's Slack slash command, posted to the gateway's /hooks/slack and signed with
// their integration's signing secret, becomes their message in the integration's
// conversation and is answered there; a forged one is 401 and adds nothing.
func TestChatInboundSlack(t *testing.T) {
	parallel(t)
	const secret = "e2e-slack-signing-secret-0123456789"
	user := fmt.Sprintf("U%d", time.Now().UnixNano())
	id := inboundIntegration(t, "INTEGRATION_KIND_SLACK", secret, user)
	text := "Which repositories do I have?"
	sign := func(secret, body string) map[string]string {
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte("v0:" + ts + ":" + body))
		return map[string]string{"Content-Type": "application/x-www-form-urlencoded", "X-Slack-Request-Timestamp": ts,
			"X-Slack-Signature": "v0=" + hex.EncodeToString(mac.Sum(nil))}
	}
	body := url.Values{"token": {"legacy"}, "team_id": {"T0E2E"}, "user_id": {user}, "user_name": {"e2e"}, "command": {"/thefold"},
		"text": {text}, "response_url": {"https://hooks.slack.com/commands/x"}}.Encode()

	code, answer := inboundPost(t, "/hooks/slack", body, sign(secret, body))
	conv := inboundConversation(t, id)
	if code != http.StatusOK || answer["response_type"] != "ephemeral" || conv == "" || !strings.Contains(fmt.Sprint(answer["text"]), conv) {
		t.Fatalf("slash command: %d %v; the integration's conversation %q", code, answer, conv)
	}
	inboundAnswered(t, conv, text)
	n := inboundMessages(t, conv)

	forged := strings.Replace(body, "Which+repositories", "Delete+all+repositories", 1)
	code, refused := inboundPost(t, "/hooks/slack", forged, sign("not-the-secret", forged))
	if code != http.StatusUnauthorized || refused["error"] != "the request's signature does not verify" {
		t.Fatalf("forged: %d %v", code, refused)
	}
	if got := inboundMessages(t, conv); got != n {
		t.Fatalf("the conversation has %d messages after a forged command, had %d", got, n)
	}
}

// The same for Discord: the endpoint's PING and a slash command verify with the
// integration's Ed25519 public key; a command signed with another key is 401.
func TestChatInboundDiscord(t *testing.T) {
	parallel(t)
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	_, forger, _ := ed25519.GenerateKey(rand.Reader)
	user := strconv.FormatInt(time.Now().UnixNano(), 10)
	id := inboundIntegration(t, "INTEGRATION_KIND_DISCORD", hex.EncodeToString(pub), user)
	sign := func(key ed25519.PrivateKey, body string) map[string]string {
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		return map[string]string{"Content-Type": "application/json", "X-Signature-Timestamp": ts,
			"X-Signature-Ed25519": hex.EncodeToString(ed25519.Sign(key, []byte(ts+body)))}
	}
	command := func(text string) string {
		b, _ := json.Marshal(map[string]any{"type": 2, "id": "1", "application_id": "2", "member": map[string]any{"user": map[string]any{"id": user}},
			"data": map[string]any{"name": "thefold", "options": []map[string]any{{"name": "text", "type": 3, "value": text}}}})
		return string(b)
	}

	ping := `{"type":1,"id":"1","application_id":"2"}`
	if code, got := inboundPost(t, "/hooks/discord", ping, sign(key, ping)); code != http.StatusOK || len(got) != 1 || got["type"] != float64(1) {
		t.Fatalf("PING: %d %v", code, got)
	}
	if code, got := inboundPost(t, "/hooks/discord", ping, sign(forger, ping)); code != http.StatusUnauthorized {
		t.Fatalf("forged PING: %d %v", code, got)
	}

	text := "Which repositories do I have?"
	body := command(text)
	code, answer := inboundPost(t, "/hooks/discord", body, sign(key, body))
	conv := inboundConversation(t, id)
	data, _ := answer["data"].(map[string]any)
	if code != http.StatusOK || answer["type"] != float64(4) || data["flags"] != float64(64) || conv == "" || !strings.Contains(fmt.Sprint(data["content"]), conv) {
		t.Fatalf("slash command: %d %v; the integration's conversation %q", code, answer, conv)
	}
	inboundAnswered(t, conv, text)
	n := inboundMessages(t, conv)

	forged := command("Delete all repositories")
	code, refused := inboundPost(t, "/hooks/discord", forged, sign(forger, forged))
	if code != http.StatusUnauthorized || refused["error"] != "the request's signature does not verify" {
		t.Fatalf("forged: %d %v", code, refused)
	}
	if got := inboundMessages(t, conv); got != n {
		t.Fatalf("the conversation has %d messages after a forged command, had %d", got, n)
	}
}
