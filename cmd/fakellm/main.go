// Command fakellm serves scripted answers in the Anthropic, OpenAI and Gemini wire formats
// (see pkg/fakellm), for the demo and for tests that run whole binaries. It is not a
// language model: without a script it refuses every request.
//
//	fakellm --addr 127.0.0.1:8090 --script script.json
//
// THEFOLD_FAKELLM_ADDR and THEFOLD_FAKELLM_SCRIPT set the same; flags win.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/thefold/thefold/pkg/config"
	"github.com/thefold/thefold/pkg/fakellm"
	"github.com/thefold/thefold/pkg/logging"
)

// shutdownTimeout bounds the drain on SIGTERM; scripted latencies longer than this are cut.
const shutdownTimeout = 10 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], config.Env(nil), os.Stderr, nil); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			logging.New(os.Stderr, "fakellm", slog.LevelInfo).Error("fakellm stopped", "err", err)
		}
		os.Exit(1)
	}
}

// fakellmConfig is the environment's part of the configuration; flags override it.
type fakellmConfig struct {
	// Addr is where the fake model server listens (the Anthropic, OpenAI and Gemini wire formats).
	Addr string `env:"THEFOLD_FAKELLM_ADDR, default=127.0.0.1:8090"`
	// Script is the JSON file of scripted answers; without one every request is refused.
	Script string `env:"THEFOLD_FAKELLM_SCRIPT"`
	// LogLevel is the least severe level logged.
	LogLevel string `env:"THEFOLD_LOG_LEVEL, default=info"`
}

// run serves until ctx ends. ready, when set, gets the address actually listened on (tests
// listen on port 0).
func run(ctx context.Context, args []string, lookup config.Lookuper, logOut io.Writer, ready func(addr string)) error {
	var cfg fakellmConfig
	if err := config.Load(ctx, &cfg, lookup); err != nil {
		return err
	}
	fs := flag.NewFlagSet("fakellm", flag.ContinueOnError)
	fs.SetOutput(logOut)
	fs.StringVar(&cfg.Addr, "addr", cfg.Addr, "address to listen on (THEFOLD_FAKELLM_ADDR)")
	fs.StringVar(&cfg.Script, "script", cfg.Script, "JSON script of the answers to replay (THEFOLD_FAKELLM_SCRIPT); without one every request fails")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	log := logging.New(logOut, "fakellm", logging.ParseLevel(cfg.LogLevel))

	var script *fakellm.Script
	if cfg.Script != "" {
		s, err := fakellm.LoadScript(cfg.Script)
		if err != nil {
			return err
		}
		script = s
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           fakellm.New(script, fakellm.WithLogger(log)),
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	log.Info("fakellm listening: it replays scripted answers and is not a language model",
		"addr", ln.Addr().String(), "script", cfg.Script, "script_loaded", script != nil)
	if ready != nil {
		ready(ln.Addr().String())
	}

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	log.Info("fakellm shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		_ = srv.Close()
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
