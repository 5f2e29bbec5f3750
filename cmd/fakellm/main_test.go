package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/thefold/thefold/pkg/config"
)

// syncBuffer is a log sink the server goroutine writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func writeScript(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestServes(t *testing.T) {
	t.Parallel()
	script := writeScript(t, `{"anthropic":[{"text":"scripted hello","repeat_last":true}]}`)
	cases := []struct {
		name       string
		args       []string
		env        map[string]string
		wantStatus int
		wantBody   string
	}{
		{"script by flag", []string{"--addr", "127.0.0.1:0", "--script", script}, nil, 200, `"text":"scripted hello"`},
		{"script by environment", nil, map[string]string{"THEFOLD_FAKELLM_ADDR": "127.0.0.1:0", "THEFOLD_FAKELLM_SCRIPT": script}, 200, `"text":"scripted hello"`},
		{"flag wins over environment", []string{"-script", script}, map[string]string{"THEFOLD_FAKELLM_ADDR": "127.0.0.1:0", "THEFOLD_FAKELLM_SCRIPT": "/nonexistent.json"}, 200, `"text":"scripted hello"`},
		{"no script refuses", []string{"--addr", "127.0.0.1:0"}, nil, 500, "fakellm: no script loaded"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			addrs := make(chan string, 1)
			done := make(chan error, 1)
			logs := &syncBuffer{}
			go func() {
				done <- run(ctx, c.args, config.Map(c.env, nil), logs, func(a string) { addrs <- a })
			}()
			var addr string
			select {
			case addr = <-addrs:
			case err := <-done:
				t.Fatalf("run ended before listening: %v", err)
			}
			resp, err := http.Post("http://"+addr+"/v1/messages", "application/json",
				strings.NewReader(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.wantStatus || !strings.Contains(string(b), c.wantBody) {
				t.Errorf("%d %s, want %d with %s", resp.StatusCode, b, c.wantStatus, c.wantBody)
			}
			cancel()
			if err := <-done; err != nil {
				t.Errorf("run after cancel: %v", err)
			}
			if !strings.Contains(logs.String(), "replays scripted answers and is not a language model") {
				t.Errorf("start-up log does not say what it is:\n%s", logs.String())
			}
		})
	}
}

func TestRefusesToStart(t *testing.T) {
	t.Parallel()
	invalid := writeScript(t, `{"openai":[{"txt":"typo"}]}`)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"missing script", []string{"--script", "/nonexistent/script.json"}, "no such file"},
		{"invalid script", []string{"--script", invalid}, `unknown field "txt"`},
		{"unknown flag", []string{"--port", "1"}, "flag provided but not defined"},
		{"extra arguments", []string{"serve"}, "unexpected arguments"},
		{"bad address", []string{"--addr", "127.0.0.1:notaport"}, "notaport"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			err := run(context.Background(), c.args, config.Map(nil, nil), io.Discard, nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want one mentioning %q", err, c.want)
			}
		})
	}
}
