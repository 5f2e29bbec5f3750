package service

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
)

// Config is the github service's own configuration, beside platform.Config.
type Config struct {
	// Forge serves the owners named in neither LocalOwners nor GitHubOwners, and the
	// repositories CreateRepo makes without a provider: local or github.
	Forge string `env:"THEFOLD_GITHUB_FORGE, default=local"`
	// GitHubOwners are the owners (users or organisations) whose repositories live on
	// GitHub; LocalOwners those in the local forge. The owner "local" is always local.
	GitHubOwners []string `env:"THEFOLD_GITHUB_OWNERS"`
	LocalOwners  []string `env:"THEFOLD_GITHUB_LOCAL_OWNERS"`
	// SharedOwners are local owners, besides "local", that work as shared namespaces:
	// anyone may create a repository there and owns what they create. Every other owner
	// segment of the local forge is a namespace someone claims (CreateNamespace).
	SharedOwners []string `env:"THEFOLD_GITHUB_SHARED_OWNERS"`
	// SecretKeyFile is the key (64 hex digits) that encrypts people's own GitHub tokens at
	// rest; empty: $THEFOLD_DATA_DIR/keys/github-secret.key, made on first start (thefold
	// init makes it too, for docker compose). Without either,
	// people cannot store GitHub tokens.
	SecretKeyFile string `env:"THEFOLD_GITHUB_SECRET_KEY_FILE"`
	// Token authenticates to GitHub (a fine-grained or classic personal access token, or
	// an app installation token); without it the github provider is off.
	Token string `env:"THEFOLD_GITHUB_TOKEN" secret:"true"`
	// APIURL is GitHub's REST API: empty for github.com, else GitHub Enterprise's
	// (https://ghe.example.com/api/v3/).
	APIURL string `env:"THEFOLD_GITHUB_API_URL"`
	// RepoDir holds the local forge's bare repositories; empty: $THEFOLD_DATA_DIR/repos,
	// else a directory under the user's cache directory.
	RepoDir string `env:"THEFOLD_GITHUB_REPO_DIR"`
	DataDir string `env:"THEFOLD_DATA_DIR"`
	// PublicURL is the gateway's URL, for the links of the local forge's pull requests and
	// issues.
	PublicURL string `env:"THEFOLD_GITHUB_PUBLIC_URL, default=http://127.0.0.1:8080"`
	// TreeCache and IndexCache are how many trees (by commit) and relevance indexes (by
	// commit) are kept in memory.
	TreeCache  int `env:"THEFOLD_GITHUB_TREE_CACHE, default=64"`
	IndexCache int `env:"THEFOLD_GITHUB_INDEX_CACHE, default=4"`
	// MaxIndexFileBytes: larger files are left out of relevance ranking.
	MaxIndexFileBytes int64 `env:"THEFOLD_GITHUB_MAX_INDEX_FILE_BYTES, default=1048576"`
}

var ownerPattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,100}$`)

// Validate collects every problem.
func (c *Config) Validate() error {
	var problems []error
	if !slices.Contains([]string{"local", "github"}, c.Forge) {
		problems = append(problems, fmt.Errorf("THEFOLD_GITHUB_FORGE: %q: want local or github", c.Forge))
	}
	if c.Forge == "github" && c.Token == "" {
		problems = append(problems, errors.New("THEFOLD_GITHUB_FORGE=github needs THEFOLD_GITHUB_TOKEN"))
	}
	if len(c.GitHubOwners) > 0 && c.Token == "" && c.SecretKeyPath() == "" {
		problems = append(problems, errors.New("THEFOLD_GITHUB_OWNERS needs THEFOLD_GITHUB_TOKEN, or THEFOLD_GITHUB_SECRET_KEY_FILE / THEFOLD_DATA_DIR so people can store their own GitHub tokens"))
	}
	for _, o := range slices.Concat(c.GitHubOwners, c.LocalOwners, c.SharedOwners) {
		if !ownerPattern.MatchString(o) {
			problems = append(problems, fmt.Errorf("THEFOLD_GITHUB_OWNERS / THEFOLD_GITHUB_LOCAL_OWNERS: %q is not an owner name", o))
		}
	}
	for _, o := range c.GitHubOwners {
		if slices.Contains(c.LocalOwners, o) || o == "local" {
			problems = append(problems, fmt.Errorf("owner %q is in both THEFOLD_GITHUB_OWNERS and THEFOLD_GITHUB_LOCAL_OWNERS (or is \"local\")", o))
		}
	}
	for _, o := range c.SharedOwners {
		if slices.Contains(c.GitHubOwners, o) {
			problems = append(problems, fmt.Errorf("THEFOLD_GITHUB_SHARED_OWNERS: %q is a GitHub owner (THEFOLD_GITHUB_OWNERS); shared namespaces are local", o))
		}
	}
	if c.TreeCache < 1 || c.IndexCache < 1 {
		problems = append(problems, errors.New("THEFOLD_GITHUB_TREE_CACHE and THEFOLD_GITHUB_INDEX_CACHE: want at least 1"))
	}
	if c.MaxIndexFileBytes < 1 {
		problems = append(problems, errors.New("THEFOLD_GITHUB_MAX_INDEX_FILE_BYTES: want at least 1"))
	}
	return errors.Join(problems...)
}

// SecretKeyPath is the key file that encrypts people's GitHub tokens, "" when none.
func (c *Config) SecretKeyPath() string {
	switch {
	case c.SecretKeyFile != "":
		return c.SecretKeyFile
	case c.DataDir != "":
		return filepath.Join(c.DataDir, "keys", "github-secret.key")
	}
	return ""
}

// RepoDirectory is where the local forge keeps repositories.
func (c *Config) RepoDirectory() string {
	switch {
	case c.RepoDir != "":
		return c.RepoDir
	case c.DataDir != "":
		return filepath.Join(c.DataDir, "repos")
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "thefold", "repos")
	}
	return filepath.Join(os.TempDir(), "thefold-repos")
}
