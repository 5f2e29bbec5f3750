package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/thefold/thefold/pkg/client"
	gatewayv1 "github.com/thefold/thefold/pkg/gen/thefold/gateway/v1"
)

// errNotLoggedIn is a command that needs credentials run without any.
var errNotLoggedIn = errors.New("not logged in: run thefold login (or set THEFOLD_TOKEN or THEFOLD_API_KEY)")

// profile is one server and who the command line is there.
type profile struct {
	Host  string            `json:"host,omitempty"`
	Addrs map[string]string `json:"addrs,omitempty"`
	// One of: an access token (with its refresh token and expiry, for a login session),
	// or an API key.
	Token        string    `json:"token,omitempty"`
	RefreshToken string    `json:"refresh_token,omitempty"`
	Expires      time.Time `json:"expires,omitzero"`
	APIKey       string    `json:"api_key,omitempty"`
	UserID       string    `json:"user_id,omitempty"`
}

// profiles is the command line's credentials file (0600 in the user's config directory).
type profiles struct {
	Current  string              `json:"current,omitempty"`
	Profiles map[string]*profile `json:"profiles"`
}

// profilesPath is where the credentials are kept: $THEFOLD_CONFIG_DIR, else the user's
// config directory, /thefold/profiles.json.
func profilesPath() (string, error) {
	dir := os.Getenv("THEFOLD_CONFIG_DIR")
	if dir == "" {
		base, err := os.UserConfigDir()
		if err != nil {
			return "", fmt.Errorf("no config directory for the credentials (set THEFOLD_CONFIG_DIR): %w", err)
		}
		dir = filepath.Join(base, "thefold")
	}
	return filepath.Join(dir, "profiles.json"), nil
}

func loadProfiles() (*profiles, string, error) {
	path, err := profilesPath()
	if err != nil {
		return nil, "", err
	}
	ps := &profiles{Profiles: map[string]*profile{}}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return ps, path, nil
	case err != nil:
		return nil, "", err
	}
	if err := json.Unmarshal(b, ps); err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	if ps.Profiles == nil {
		ps.Profiles = map[string]*profile{}
	}
	return ps, path, nil
}

// save writes the file with only its owner able to read it.
func (ps *profiles) save(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(ps, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// name is the profile the command uses.
func (g *globals) name(ps *profiles) string {
	switch {
	case g.profile != "":
		return g.profile
	case ps.Current != "":
		return ps.Current
	}
	return "default"
}

// clientConfig is the configuration of the profile, with the environment's settings where
// the profile has none; errNotLoggedIn when neither gives credentials. An expired login
// session is refreshed (and saved) first.
func (g *globals) clientConfig() (client.Config, *profile, error) {
	env := client.FromEnv()
	ps, path, err := loadProfiles()
	if err != nil {
		return env, nil, err
	}
	p := ps.Profiles[g.name(ps)]
	if p == nil {
		if g.profile != "" {
			return env, nil, usageError{fmt.Errorf("no profile %q (thefold login --profile %s)", g.profile, g.profile)}
		}
		if env.Token == "" && env.APIKey == "" {
			return env, nil, errNotLoggedIn
		}
		return env, nil, nil
	}
	cfg := client.Config{Host: p.Host, Addrs: p.Addrs, Token: p.Token, APIKey: p.APIKey}
	if cfg.Host == "" {
		cfg.Host = env.Host
	}
	if len(cfg.Addrs) == 0 {
		cfg.Addrs = env.Addrs
	}
	if p.RefreshToken != "" && !p.Expires.IsZero() && time.Until(p.Expires) < time.Minute {
		c, err := client.New(client.Config{Host: cfg.Host, Addrs: cfg.Addrs})
		if err != nil {
			return cfg, p, err
		}
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		resp, err := c.Auth().RefreshToken(ctx, &gatewayv1.RefreshTokenRequest{RefreshToken: p.RefreshToken})
		if err != nil {
			return cfg, p, fmt.Errorf("the login expired and could not be refreshed: %w", err)
		}
		p.Token, p.RefreshToken, p.Expires = resp.GetTokens().GetAccessToken(), resp.GetTokens().GetRefreshToken(), resp.GetTokens().GetAccessExpireTime().AsTime()
		if err := ps.save(path); err != nil {
			return cfg, p, err
		}
		cfg.Token = p.Token
	}
	return cfg, p, nil
}

func loginCommand(g *globals) *cobra.Command {
	var (
		host, token, apiKey, email string
		addrs                      []string
	)
	cmd := &cobra.Command{
		Use:   "login",
		Short: "Log in to a TheFold server and keep the credentials in a profile",
		Long: `Log in with a one-time code sent to your e-mail (--email), an API key (--api-key, or
THEFOLD_API_KEY), or an access token (--token, e.g. the local stack's admin token from
thefold token). The credentials are kept in $THEFOLD_CONFIG_DIR (default the user's config
directory)/thefold/profiles.json, readable by you alone, under the profile named by
--profile (default "default"), which becomes the current one.`,
		Example: `  thefold login --email ada@example.com
  thefold login --api-key "$THEFOLD_API_KEY" --profile ci
  thefold login --token "$(cat .thefold/admin.token)" --host 127.0.0.1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			n := 0
			for _, v := range []string{token, apiKey, email} {
				if v != "" {
					n++
				}
			}
			if n != 1 {
				return usageError{errors.New("give one of --email, --api-key or --token")}
			}
			p := &profile{Host: host, Addrs: map[string]string{}}
			for _, a := range addrs {
				svc, addr, ok := strings.Cut(a, "=")
				if !ok || svc == "" || addr == "" {
					return usageError{fmt.Errorf("--addr %q: want service=host:port", a)}
				}
				p.Addrs[svc] = addr
			}
			// Where to log in: the flags, else the environment (the profile keeps only what
			// the flags said; later commands fall back to the environment likewise).
			base := client.FromEnv()
			if host != "" {
				base.Host = host
			}
			for svc, addr := range p.Addrs {
				base.Addrs[svc] = addr
			}
			ctx := cmd.Context()
			switch {
			case email != "":
				base.Token, base.APIKey = "", ""
				c, err := client.New(base)
				if err != nil {
					return err
				}
				defer c.Close()
				if _, err := c.Auth().RequestLoginCode(ctx, &gatewayv1.RequestLoginCodeRequest{Email: email}); err != nil {
					return err
				}
				fmt.Fprintf(g.errOut, "A one-time code was sent to %s. Code: ", email)
				code, err := bufio.NewReader(g.in).ReadString('\n')
				if err != nil && code == "" {
					return usageError{errors.New("no code given")}
				}
				resp, err := c.Auth().VerifyLoginCode(ctx, &gatewayv1.VerifyLoginCodeRequest{Email: email, Code: strings.TrimSpace(code)})
				if err != nil {
					return err
				}
				t := resp.GetTokens()
				p.Token, p.RefreshToken, p.Expires = t.GetAccessToken(), t.GetRefreshToken(), t.GetAccessExpireTime().AsTime()
			case apiKey != "":
				p.APIKey = apiKey
			default:
				p.Token = token
			}
			c, err := client.New(client.Config{Host: base.Host, Addrs: base.Addrs, Token: p.Token, APIKey: p.APIKey})
			if err != nil {
				return err
			}
			defer c.Close()
			who, err := c.Auth().WhoAmI(ctx, &gatewayv1.WhoAmIRequest{})
			if err != nil {
				return fmt.Errorf("the credentials were refused: %w", err)
			}
			p.UserID = who.GetUserId()
			ps, path, err := loadProfiles()
			if err != nil {
				return err
			}
			name := g.name(&profiles{})
			if g.profile != "" {
				name = g.profile
			}
			ps.Profiles[name], ps.Current = p, name
			if err := ps.save(path); err != nil {
				return err
			}
			fmt.Fprintf(g.out, "Logged in as %s (profile %s, %s)\n", who.GetUserId(), name, path)
			return nil
		},
	}
	cmd.Flags().StringVar(&host, "host", "", "the server's host; its services on the documented ports (default 127.0.0.1)")
	cmd.Flags().StringArrayVar(&addrs, "addr", nil, "a service's address, service=host:port (repeatable)")
	cmd.Flags().StringVar(&email, "email", "", "log in with a one-time code sent to this address")
	cmd.Flags().StringVar(&apiKey, "api-key", os.Getenv("THEFOLD_API_KEY"), "log in with an API key")
	cmd.Flags().StringVar(&token, "token", "", "log in with an access token")
	return cmd
}

func logoutCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "logout",
		Short:   "Forget the profile's credentials (and end its login session)",
		Example: "  thefold logout\n  thefold logout --profile ci",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ps, path, err := loadProfiles()
			if err != nil {
				return err
			}
			name := g.name(ps)
			p := ps.Profiles[name]
			if p == nil {
				return usageError{fmt.Errorf("no profile %q to log out of", name)}
			}
			if p.RefreshToken != "" {
				cfg, _, _ := g.clientConfig()
				cfg.APIKey = ""
				cfg.Token = p.Token
				if c, err := client.New(cfg); err == nil {
					ctx, cancel := context.WithTimeout(cmd.Context(), 10*time.Second)
					_, err := c.Auth().RevokeToken(ctx, &gatewayv1.RevokeTokenRequest{Token: p.RefreshToken})
					cancel()
					_ = c.Close()
					if err != nil {
						fmt.Fprintln(g.errOut, "thefold: the session was not ended on the server:", describe(err))
					}
				}
			}
			delete(ps.Profiles, name)
			if ps.Current == name {
				ps.Current = ""
			}
			if err := ps.save(path); err != nil {
				return err
			}
			fmt.Fprintf(g.out, "Logged out of profile %s\n", name)
			return nil
		},
	}
}

func whoamiCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "whoami",
		Short:   "Show who the command line is logged in as",
		Example: "  thefold whoami\n  thefold whoami --profile ci -o json",
		Args:    cobra.NoArgs,
		RunE: g.withClient(func(cmd *cobra.Command, _ []string, c *client.Client) error {
			who, err := c.Auth().WhoAmI(cmd.Context(), &gatewayv1.WhoAmIRequest{})
			if err != nil {
				return err
			}
			return g.print(who, func(w *tabwriterWriter) {
				fmt.Fprintf(w, "user\t%s\nrole\t%s\n", who.GetUserId(), strings.ToLower(strings.TrimPrefix(who.GetRole().String(), "ROLE_")))
				if len(who.GetScopes()) > 0 {
					fmt.Fprintf(w, "scopes\t%s\n", strings.Join(who.GetScopes(), ", "))
				}
				if who.GetExpireTime() != nil {
					fmt.Fprintf(w, "expires\t%s\n", who.GetExpireTime().AsTime().Local().Format(time.RFC3339))
				}
			})
		}),
	}
}
