package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/thefold/thefold/pkg/fakellm"
	"github.com/thefold/thefold/pkg/platform"
	"github.com/thefold/thefold/pkg/stack"
)

// providerKeys are the settings that name a real model provider; with none of them set the
// demo and the eval run the scripted model.
var providerKeys = []string{"THEFOLD_AI_PROVIDER", "THEFOLD_AI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "MOONSHOT_API_KEY"}

// realProvider says which provider setting of the environment names a real model, "" when
// none does.
func realProvider() string {
	if p := os.Getenv("THEFOLD_AI_PROVIDER"); p != "" {
		if u := os.Getenv("THEFOLD_AI_BASE_URL"); u != "" {
			return fmt.Sprintf("THEFOLD_AI_PROVIDER=%s at %s", p, u)
		}
		return "THEFOLD_AI_PROVIDER=" + p
	}
	for _, k := range providerKeys[1:] {
		if os.Getenv(k) != "" {
			return k
		}
	}
	return ""
}

// startScriptedModel serves script on a loopback port as an Anthropic-compatible model
// (fakellm) and points the ai service at it: the environment the stack's services inherit is
// set, and a stack already running (with another model, or none) is stopped so that up
// starts it with this one. stop ends both, the stack first: its model ends with the caller.
func startScriptedModel(st *stack.Stack, script *fakellm.Script, out io.Writer) (stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: fakellm.New(script), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	for k, v := range map[string]string{"THEFOLD_AI_PROVIDER": "anthropic", "THEFOLD_AI_BASE_URL": "http://" + ln.Addr().String(), "THEFOLD_AI_API_KEY": "scripted-model"} {
		if err := os.Setenv(k, v); err != nil {
			_ = srv.Close()
			return nil, err
		}
	}
	if len(downServices(st)) < len(platform.ServiceNames) || st.SupervisorRunning() {
		fmt.Fprintln(out, "restarting the stack with the scripted model …")
		if err := st.Stop(20 * time.Second); err != nil {
			_ = srv.Close()
			return nil, err
		}
	}
	return func() {
		_ = st.Stop(20 * time.Second)
		_ = srv.Close()
	}, nil
}

// scriptedNotice lists the provider settings that would select a real model.
func scriptedNotice() string { return strings.Join(providerKeys[2:], ", ") }
