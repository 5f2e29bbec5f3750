package e2e

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	gatewayv1 "github.com/thefold/thefold/pkg/gen/thefold/gateway/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
)

// revocationDeadline is how soon a revocation must reach every service.
const revocationDeadline = 5 * time.Second

// newUser has the admin create a member over REST and returns their id and address.
func newUser(t *testing.T, name string) (id, email string) {
	t.Helper()
	email = fmt.Sprintf("%s-%d@example.com", name, time.Now().UnixNano())
	code, body := rest(t, "POST", "/v1/users", token, map[string]any{"email": email, "display_name": name})
	if code != http.StatusOK {
		t.Fatalf("create user = %d %v", code, body)
	}
	return body["user"].(map[string]any)["id"].(string), email
}

var codePattern = regexp.MustCompile(`\b(\d{6})\b`)

// mailedCode waits for a login code mailed to email after skip earlier ones, as the log
// mailer wrote it to the stack's mail sink.
func mailedCode(t *testing.T, email string, skip int) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		raw, _ := os.ReadFile(mesh.MailSinkPath())
		seen := 0
		for _, line := range strings.Split(string(raw), "\n") {
			var m struct{ To, Subject, Text string }
			if json.Unmarshal([]byte(line), &m) != nil || !strings.EqualFold(m.To, email) {
				continue
			}
			if seen++; seen > skip {
				if c := codePattern.FindStringSubmatch(m.Text); c != nil {
					return c[1]
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no login code mailed to %s in %s", email, mesh.MailSinkPath())
	return ""
}

// login logs email in with a code from the mail sink and returns the token pair.
func login(t *testing.T, email string, skip int) (access, refresh string) {
	t.Helper()
	if code, body := rest(t, "POST", "/v1/auth/login-code", "", map[string]any{"email": email}); code != http.StatusOK {
		t.Fatalf("request code = %d %v", code, body)
	}
	c := mailedCode(t, email, skip)
	code, body := rest(t, "POST", "/v1/auth/login-code:verify", "", map[string]any{"email": email, "code": c})
	if code != http.StatusOK {
		t.Fatalf("verify code = %d %v", code, body)
	}
	toks := body["tokens"].(map[string]any)
	// Single use: the same code again is refused.
	if code, body := rest(t, "POST", "/v1/auth/login-code:verify", "", map[string]any{"email": email, "code": c}); code != http.StatusUnauthorized {
		t.Fatalf("reused code = %d %v, want 401", code, body)
	}
	return toks["access_token"].(string), toks["refresh_token"].(string)
}

func bearer(ctx context.Context, tok string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
}

// refusedEverywhere waits until tok is refused by the gateway (401) and by tasks over
// gRPC (Unauthenticated), and fails if that takes longer than revocationDeadline after
// since.
func refusedEverywhere(t *testing.T, tok, taskID string, since time.Time) {
	t.Helper()
	tasks := tasksv1.NewTaskServiceClient(dial(t, "tasks"))
	var restDone, grpcDone time.Duration
	for time.Since(since) < revocationDeadline+2*time.Second && (restDone == 0 || grpcDone == 0) {
		if restDone == 0 {
			if code, _ := rest(t, "GET", "/v1/tasks/"+taskID, tok, nil); code == http.StatusUnauthorized {
				restDone = time.Since(since)
			}
		}
		if grpcDone == 0 {
			ctx, cancel := context.WithTimeout(bearer(context.Background(), tok), 5*time.Second)
			_, err := tasks.GetTask(ctx, &tasksv1.GetTaskRequest{Id: taskID})
			cancel()
			if status.Code(err) == codes.Unauthenticated {
				grpcDone = time.Since(since)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if restDone == 0 || restDone > revocationDeadline || grpcDone == 0 || grpcDone > revocationDeadline {
		t.Fatalf("revoked credential refused by the gateway after %v and by tasks over gRPC after %v (0: never); want both within %v",
			restDone, grpcDone, revocationDeadline)
	}
	t.Logf("revocation took effect: gateway %v, tasks over gRPC %v", restDone, grpcDone)
}

// curlSSE follows url with `curl -N` as server-sent events and returns the lines it
// prints, as they come.
func curlSSE(t *testing.T, url, tok string) (lines func() []string, stop func()) {
	t.Helper()
	cmd := exec.Command("curl", "-N", "-s", "-H", "Authorization: Bearer "+tok, "-H", "Accept: text/event-stream", url)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("curl: %v", err)
	}
	var mu sync.Mutex
	var got []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			mu.Lock()
			got = append(got, sc.Text())
			mu.Unlock()
		}
	}()
	stop = func() {
		_ = cmd.Process.Kill()
		<-done
		_ = cmd.Wait()
	}
	t.Cleanup(stop)
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}, stop
}

// waitLines waits until lines() holds a line with each of wants.
func waitLines(t *testing.T, lines func() []string, wants ...string) []string {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		got := lines()
		all := true
		for _, w := range wants {
			found := false
			for _, l := range got {
				if strings.Contains(l, w) {
					found = true
					break
				}
			}
			all = all && found
		}
		if all {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("SSE lines %q lack %q", got, wants)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestLoginAcceptance is the gateway issue's acceptance: a user the admin creates logs in
// with a code read from the local mailer, creates a task over REST, follows its events with
// `curl -N` as server-sent events, and after RevokeToken is refused by the gateway (401) and
// by tasks over gRPC (Unauthenticated) within 5 seconds.
func TestLoginAcceptance(t *testing.T) {
	parallel(t)
	_, email := newUser(t, "ada")
	access, refresh := login(t, email, 0)

	code, who := rest(t, "GET", "/v1/auth/whoami", access, nil)
	if code != http.StatusOK || who["role"] != "ROLE_MEMBER" {
		t.Fatalf("whoami = %d %v", code, who)
	}
	code, body := rest(t, "POST", "/v1/tasks", access, map[string]any{"title": "logged in", "repo": "local/login"})
	if code != http.StatusOK {
		t.Fatalf("create task = %d %v", code, body)
	}
	taskID := body["task"].(map[string]any)["id"].(string)

	lines, stop := curlSSE(t, mesh.GatewayURL()+"/v1/tasks:watch?id="+taskID, access)
	waitLines(t, lines, "id: ", "event: TASK_EVENT_TYPE_CREATED", taskID)
	if code, body := rest(t, "PATCH", "/v1/tasks/"+taskID+"?update_mask=title", access, map[string]any{"title": "renamed"}); code != http.StatusOK {
		t.Fatalf("update task = %d %v", code, body)
	}
	got := waitLines(t, lines, "event: TASK_EVENT_TYPE_UPDATED", "renamed")
	stop()
	t.Logf("curl -N saw %d SSE lines", len(got))

	// The refresh token works before the revocation of the access token, and after it:
	// revoking an access token does not end the session.
	revoked := time.Now()
	if code, body := rest(t, "POST", "/v1/auth/tokens:revoke", access, map[string]any{}); code != http.StatusOK {
		t.Fatalf("revoke = %d %v", code, body)
	}
	refusedEverywhere(t, access, taskID, revoked)
	code, body = rest(t, "POST", "/v1/auth/tokens:refresh", "", map[string]any{"refresh_token": refresh})
	if code != http.StatusOK {
		t.Fatalf("refresh = %d %v", code, body)
	}
	next := body["tokens"].(map[string]any)
	if code, _ := rest(t, "GET", "/v1/tasks/"+taskID, next["access_token"].(string), nil); code != http.StatusOK {
		t.Fatalf("refreshed access token: GET task = %d", code)
	}
	// Logout: revoking the refresh token ends the session and its access tokens.
	loggedOut := time.Now()
	if code, body := rest(t, "POST", "/v1/auth/tokens:revoke", next["access_token"].(string),
		map[string]any{"token": next["refresh_token"]}); code != http.StatusOK {
		t.Fatalf("logout = %d %v", code, body)
	}
	refusedEverywhere(t, next["access_token"].(string), taskID, loggedOut)
}

// TestAPIKeyLifecycle: a key created over REST works as a bearer token at the gateway and
// directly against a service over gRPC, shows its scopes, is refused outside them, and is
// refused everywhere within 5 seconds of its revocation.
func TestAPIKeyLifecycle(t *testing.T) {
	parallel(t)
	_, email := newUser(t, "grace")
	access, _ := login(t, email, 0)
	code, body := rest(t, "POST", "/v1/tasks", access, map[string]any{"title": "keyed", "repo": "local/keys"})
	if code != http.StatusOK {
		t.Fatalf("create task = %d %v", code, body)
	}
	taskID := body["task"].(map[string]any)["id"].(string)

	code, body = rest(t, "POST", "/v1/auth/api-keys", access, map[string]any{"name": "ci", "scopes": []string{"tasks:write", "auth:read"}})
	if code != http.StatusOK {
		t.Fatalf("create key = %d %v", code, body)
	}
	secret := body["secret"].(string)
	keyID := body["api_key"].(map[string]any)["id"].(string)
	if !strings.HasPrefix(secret, "tfk_") {
		t.Fatalf("secret %q", secret)
	}
	code, list := rest(t, "GET", "/v1/auth/api-keys", access, nil)
	if code != http.StatusOK || strings.Contains(fmt.Sprint(list), secret) || len(list["api_keys"].([]any)) != 1 {
		t.Fatalf("list keys = %d %v", code, list)
	}
	code, who := rest(t, "GET", "/v1/auth/whoami", secret, nil)
	if code != http.StatusOK || fmt.Sprint(who["scopes"]) != "[tasks:write auth:read]" {
		t.Fatalf("whoami with key = %d %v", code, who)
	}
	if code, body := rest(t, "GET", "/v1/tasks/"+taskID, secret, nil); code != http.StatusOK {
		t.Fatalf("GET task with key = %d %v", code, body)
	}
	ctx, cancel := context.WithTimeout(bearer(context.Background(), secret), 10*time.Second)
	defer cancel()
	if _, err := tasksv1.NewTaskServiceClient(dial(t, "tasks")).GetTask(ctx, &tasksv1.GetTaskRequest{Id: taskID}); err != nil {
		t.Fatalf("GetTask over gRPC with the key: %v", err)
	}
	// Outside its scopes: memory is not among them.
	if code, body := rest(t, "GET", "/v1/memories?page_size=1", secret, nil); code != http.StatusForbidden {
		t.Fatalf("memory with a tasks key = %d %v, want 403", code, body)
	}

	revoked := time.Now()
	if code, body := rest(t, "POST", "/v1/auth/api-keys/"+keyID+":revoke", access, map[string]any{}); code != http.StatusOK ||
		body["api_key"].(map[string]any)["revoke_time"] == nil {
		t.Fatalf("revoke key = %d %v", code, body)
	}
	refusedEverywhere(t, secret, taskID, revoked)
}

// TestAPIKeyScopesCoverWhatTheCallTakes: a key's scopes say what it may call; what serving
// that call takes from other services is done by the service for the key's owner. A key
// with memory:write stores a memory (memory asks ai for the embedding), one with
// agent:write starts a job (the agent reads the task and the repository) — and each is
// still refused outside its scopes.
func TestAPIKeyScopesCoverWhatTheCallTakes(t *testing.T) {
	parallel(t)
	_, email := newUser(t, "hedy")
	access, _ := login(t, email, 0)
	repo := fmt.Sprintf("local/nowhere-%d", time.Now().UnixNano())
	code, body := rest(t, "POST", "/v1/tasks", access, map[string]any{"title": "scoped", "repo": repo})
	if code != http.StatusOK {
		t.Fatalf("create task = %d %v", code, body)
	}
	taskID := body["task"].(map[string]any)["id"].(string)
	key := func(name string, scopes ...string) string {
		t.Helper()
		code, body := rest(t, "POST", "/v1/auth/api-keys", access, map[string]any{"name": name, "scopes": scopes})
		if code != http.StatusOK {
			t.Fatalf("create key = %d %v", code, body)
		}
		return body["secret"].(string)
	}
	memKey, agentKey := key("notes", "memory:write"), key("runner", "agent:write")

	if code, body := rest(t, "POST", "/v1/memories", memKey, map[string]any{"content": "the build uses make", "repo": repo}); code != http.StatusOK {
		t.Errorf("StoreMemory with memory:write = %d %v, want 200", code, body)
	}
	// The agent got past the task (tasks) to the repository (github), which does not exist.
	code, body = rest(t, "POST", "/v1/jobs", agentKey, map[string]any{"task_id": taskID})
	if code != http.StatusBadRequest || body["status"] != "FAILED_PRECONDITION" || !strings.Contains(fmt.Sprint(body["message"]), "does not exist") {
		t.Errorf("StartTask with agent:write = %d %v, want 400 naming the missing repository", code, body)
	}
	if code, body := rest(t, "GET", "/v1/tasks/"+taskID, memKey, nil); code != http.StatusForbidden {
		t.Errorf("GetTask with a memory key = %d %v, want 403", code, body)
	}
	if code, body := rest(t, "POST", "/v1/memories", agentKey, map[string]any{"content": "x", "repo": repo}); code != http.StatusForbidden {
		t.Errorf("StoreMemory with an agent key = %d %v, want 403", code, body)
	}
}

// TestAdminRPCsNeedTheAdminRole: a member calling an admin RPC gets 403 over REST and
// PermissionDenied over gRPC, at the gateway and at another service.
func TestAdminRPCsNeedTheAdminRole(t *testing.T) {
	parallel(t)
	_, email := newUser(t, "linus")
	access, _ := login(t, email, 0)
	if code, body := rest(t, "POST", "/v1/users", access, map[string]any{"email": "x@example.com"}); code != http.StatusForbidden {
		t.Fatalf("member CreateUser over REST = %d %v, want 403", code, body)
	}
	ctx, cancel := context.WithTimeout(bearer(context.Background(), access), 10*time.Second)
	defer cancel()
	_, err := gatewayv1.NewUserServiceClient(dial(t, "gateway")).ListUsers(ctx, &gatewayv1.ListUsersRequest{})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("member ListUsers over gRPC: %v, want PermissionDenied", err)
	}
	_, err = aiv1.NewModelRegistryServiceClient(dial(t, "ai")).CreateProvider(ctx, &aiv1.CreateProviderRequest{})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("member CreateProvider on ai over gRPC: %v, want PermissionDenied", err)
	}
}

// TestDisabledUserIsRefusedEverywhere: disabling a user refuses their tokens in every
// service within 5 seconds, and they can no longer log in.
func TestDisabledUserIsRefusedEverywhere(t *testing.T) {
	parallel(t)
	id, email := newUser(t, "margaret")
	access, _ := login(t, email, 0)
	code, body := rest(t, "POST", "/v1/tasks", access, map[string]any{"title": "soon disabled", "repo": "local/disabled"})
	if code != http.StatusOK {
		t.Fatalf("create task = %d %v", code, body)
	}
	taskID := body["task"].(map[string]any)["id"].(string)
	disabled := time.Now()
	if code, body := rest(t, "PATCH", "/v1/users/"+id+"?update_mask=disabled", token, map[string]any{"disabled": true}); code != http.StatusOK {
		t.Fatalf("disable = %d %v", code, body)
	}
	refusedEverywhere(t, access, taskID, disabled)
	// No code is sent to a disabled user, and the answer is the same as for anyone.
	if code, body := rest(t, "POST", "/v1/auth/login-code", "", map[string]any{"email": email}); code != http.StatusOK {
		t.Fatalf("request code for a disabled user = %d %v", code, body)
	}
	code, body = rest(t, "POST", "/v1/auth/login-code:verify", "", map[string]any{"email": email, "code": "123456"})
	if code != http.StatusUnauthorized {
		t.Fatalf("verify for a disabled user = %d %v", code, body)
	}
}

// TestSigningKeyRotation: after `thefold rotate-key`, tokens signed with the old key still
// work, and the gateway signs new ones with the new key, which every service accepts.
func TestSigningKeyRotation(t *testing.T) {
	alone(t)
	_, email := newUser(t, "barbara")
	old, _ := login(t, email, 0)
	kid, err := mesh.RotateSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	tasks := tasksv1.NewTaskServiceClient(dial(t, "tasks"))
	deadline := time.Now().Add(15 * time.Second)
	for n := 1; ; n++ {
		access, _ := login(t, email, n)
		if tokenKID(t, access) == kid {
			ctx, cancel := context.WithTimeout(bearer(context.Background(), access), 5*time.Second)
			_, err := tasks.ListTasks(ctx, &tasksv1.ListTasksRequest{PageSize: 1})
			cancel()
			if err == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no token signed with the new key %s accepted by tasks within 15s", kid)
		}
		time.Sleep(500 * time.Millisecond)
	}
	for _, tok := range []string{old, token} {
		ctx, cancel := context.WithTimeout(bearer(context.Background(), tok), 5*time.Second)
		_, err := tasks.ListTasks(ctx, &tasksv1.ListTasksRequest{PageSize: 1})
		cancel()
		if err != nil {
			t.Fatalf("a token signed with the old key after the rotation: %v", err)
		}
	}
}

// tokenKID reads the kid of a JWT's header.
func tokenKID(t *testing.T, tok string) string {
	t.Helper()
	head, _, _ := strings.Cut(tok, ".")
	raw, err := base64.RawURLEncoding.DecodeString(head)
	if err != nil {
		t.Fatalf("token header: %v", err)
	}
	var h struct {
		KID string `json:"kid"`
	}
	if err := json.Unmarshal(raw, &h); err != nil {
		t.Fatalf("token header: %v", err)
	}
	return h.KID
}

// TestLoginLockout: wrong codes lock an address out with 429 and a Retry-After over REST;
// an address nobody has is locked out exactly the same way, so the answer reveals nothing.
func TestLoginLockout(t *testing.T) {
	alone(t)
	_, known := newUser(t, "alan")
	unknown := fmt.Sprintf("nobody-%d@example.com", time.Now().UnixNano())
	for _, email := range []string{known, unknown} {
		if code, body := rest(t, "POST", "/v1/auth/login-code", "", map[string]any{"email": email}); code != http.StatusOK {
			t.Fatalf("request code for %s = %d %v", email, code, body)
		}
		var statuses []int
		for range 6 {
			req, _ := http.NewRequest("POST", mesh.GatewayURL()+"/v1/auth/login-code:verify",
				strings.NewReader(fmt.Sprintf(`{"email":%q,"code":"000000"}`, email)))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			statuses = append(statuses, resp.StatusCode)
			if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
				t.Fatalf("%s: 429 without Retry-After", email)
			}
		}
		// Five wrong codes (401 each; 000000 is not the code, or there is none), then locked.
		if fmt.Sprint(statuses) != "[401 401 401 401 401 429]" {
			t.Fatalf("%s: statuses %v", email, statuses)
		}
	}

	// The admin sees both in the login report, locked out, and reads the audit.
	code, report := rest(t, "GET", "/v1/users:loginReport?window=3600s&min_failures=5", token, nil)
	if code != http.StatusOK {
		t.Fatalf("login report = %d %v", code, report)
	}
	listed := map[string]map[string]any{}
	for _, a := range report["addresses"].([]any) {
		a := a.(map[string]any)
		listed[a["email"].(string)] = a
	}
	for _, email := range []string{known, unknown} {
		a, ok := listed[strings.ToLower(email)]
		if !ok || a["failures"] != "5" || a["locked_out_attempts"] != "1" || a["locked_until"] == nil {
			t.Errorf("%s in the login report = %v (listed: %v)", email, a, ok)
		}
	}
	code, audit := rest(t, "GET", "/v1/users:loginAttempts?page_size=2&email="+url.QueryEscape(known), token, nil)
	if rows, _ := audit["attempts"].([]any); code != http.StatusOK || len(rows) != 2 || audit["next_page_token"] == "" ||
		rows[0].(map[string]any)["outcome"] != "LOGIN_OUTCOME_LOCKED_OUT" {
		t.Errorf("login audit of %s = %d %v", known, code, audit)
	}
	// A member is refused both.
	_, peer := newUser(t, "alan-peer")
	member, _ := login(t, peer, 0)
	if code, _ := rest(t, "GET", "/v1/users:loginReport", member, nil); code != http.StatusForbidden {
		t.Errorf("member's login report = %d, want 403", code)
	}
}

// A login code is in the mail sink (the development path) and nowhere else: no log line of
// any service holds it, and the logs and the data directory are the operator's alone.
func TestLoginCodeStaysOutOfTheLogs(t *testing.T) {
	parallel(t)
	_, email := newUser(t, "logs")
	if code, body := rest(t, "POST", "/v1/auth/login-code", "", map[string]any{"email": email}); code != http.StatusOK {
		t.Fatalf("request code = %d %v", code, body)
	}
	c := mailedCode(t, email, 0)
	if code, body := rest(t, "POST", "/v1/auth/login-code:verify", "", map[string]any{"email": email, "code": c}); code != http.StatusOK {
		t.Fatalf("verify code = %d %v", code, body)
	}
	// This stack logs at warn; the mailer's own test checks every level
	// (TestLogMailerSink). The subject in the sink is checked here too.
	logs, err := filepath.Glob(filepath.Join(mesh.DataDir, "logs", "*.log"))
	if err != nil || len(logs) < 9 {
		t.Fatalf("the stack's logs: %v %v", logs, err)
	}
	// The code as a token of its own: six digits also turn up inside ids and hashes of a
	// busy mesh's logs (a uuid's last group, a commit), which a substring check took for it.
	leaked := regexp.MustCompile(`(^|[^0-9A-Za-z])` + c + `([^0-9A-Za-z]|$)`)
	for _, p := range logs {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if leaked.Match(b) {
			t.Errorf("%s holds the login code", filepath.Base(p))
		}
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600 (%v)", filepath.Base(p), fi.Mode().Perm(), err)
		}
	}
	for _, d := range []string{mesh.DataDir, filepath.Join(mesh.DataDir, "logs")} {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: mode %v, want 0700 (%v)", d, fi.Mode().Perm(), err)
		}
	}
	msgs, err := os.ReadFile(mesh.MailSinkPath())
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(msgs), "\n") {
		var m struct{ To, Subject string }
		if json.Unmarshal([]byte(line), &m) == nil && strings.EqualFold(m.To, email) && strings.Contains(m.Subject, c) {
			t.Errorf("the mail's subject holds the code: %q", m.Subject)
		}
	}
}
