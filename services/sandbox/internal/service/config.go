package service

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"time"

	"github.com/thefold/thefold/services/sandbox/internal/backend/kube"
)

// Config is the sandbox service's own configuration, beside platform.Config.
type Config struct {
	// Backend is the backend of sandboxes that ask for none: auto (kubernetes when it is
	// in THEFOLD_SANDBOX_BACKENDS, else docker if an engine answers, else bwrap if it
	// works), or kubernetes, docker, bwrap, local. Every isolating backend that works here
	// is offered beside the default; a caller may ask only for one at least as isolated as
	// the default (kubernetes = docker > bwrap > local).
	Backend string `env:"THEFOLD_SANDBOX_BACKEND, default=auto"`
	// AllowLocal offers the local backend, which runs commands on this host without any
	// isolation: for development only. Even then only admins may ask for it (unless the
	// operator made it the default with THEFOLD_SANDBOX_BACKEND=local).
	AllowLocal bool `env:"THEFOLD_SANDBOX_ALLOW_LOCAL, default=false"`
	// Offer names the isolating backends the server starts when they work here (docker,
	// bwrap, kubernetes); the operator's choice of which exist. kubernetes (a pod per
	// sandbox, THEFOLD_SANDBOX_KUBE_*) is never offered unless named here, and when it is
	// named it must work: the service does not start without it.
	Offer []string `env:"THEFOLD_SANDBOX_BACKENDS, default=docker,bwrap"`
	// Dir holds the workspaces; empty: $THEFOLD_DATA_DIR/sandboxes, else a directory under
	// the system's temporary directory.
	Dir string `env:"THEFOLD_SANDBOX_DIR"`
	// DataDir is the local stack's data directory (thefold up sets it).
	DataDir string `env:"THEFOLD_DATA_DIR"`
	// TTL is how long an idle sandbox lives when CreateSandbox gives no ttl.
	TTL time.Duration `env:"THEFOLD_SANDBOX_TTL, default=30m"`
	// MaxTTL bounds the ttl a caller may ask for (a pin is the way to keep one longer).
	MaxTTL time.Duration `env:"THEFOLD_SANDBOX_MAX_TTL, default=24h"`
	// MaxPerOwner is how many live sandboxes one owner may have.
	MaxPerOwner int `env:"THEFOLD_SANDBOX_MAX_PER_OWNER, default=10"`
	// ReapInterval is how often expired sandboxes are destroyed.
	ReapInterval time.Duration `env:"THEFOLD_SANDBOX_REAP_INTERVAL, default=1m"`
	// Timeout is a command's default timeout; MaxTimeout the most a caller may ask for.
	Timeout    time.Duration `env:"THEFOLD_SANDBOX_TIMEOUT, default=5m"`
	MaxTimeout time.Duration `env:"THEFOLD_SANDBOX_MAX_TIMEOUT, default=30m"`
	// MaxOutput caps a command's kept output (stdout and stderr together) in bytes.
	MaxOutput int64 `env:"THEFOLD_SANDBOX_MAX_OUTPUT, default=1048576"`
	// Memory, CPUs and Pids are the default limits of a sandbox; the Max… fields bound what
	// a caller may ask for (CPUs: the machine's cores). The CPU default is two cores, or the
	// machine's if fewer: a sandbox mostly compiles and runs tests, and half a core made a
	// cold go build of a two-file change take minutes.
	Memory    int64   `env:"THEFOLD_SANDBOX_MEMORY, default=536870912"`
	MaxMemory int64   `env:"THEFOLD_SANDBOX_MAX_MEMORY, default=8589934592"`
	CPUs      float64 `env:"THEFOLD_SANDBOX_CPUS, default=2"`
	Pids      int32   `env:"THEFOLD_SANDBOX_PIDS, default=256"`
	MaxPids   int32   `env:"THEFOLD_SANDBOX_MAX_PIDS, default=4096"`
	// ToolchainVolumes gives docker sandboxes the image's Go toolchain and shared build
	// cache from named volumes, made once per image and mounted read-only, instead of
	// reading them through the image's layers: on an engine whose storage driver is
	// fuse-overlayfs that halves the time of every go command. Off: from the image.
	ToolchainVolumes bool `env:"THEFOLD_SANDBOX_TOOLCHAIN_VOLUMES, default=true"`
	// MaxFileBytes caps one file written or read; MaxArchiveBytes what an archive unpacks to.
	MaxFileBytes    int64 `env:"THEFOLD_SANDBOX_MAX_FILE_BYTES, default=10485760"`
	MaxArchiveBytes int64 `env:"THEFOLD_SANDBOX_MAX_ARCHIVE_BYTES, default=536870912"`
	// Allow replaces the per-language program allowlist of RunCommand when set
	// (comma-separated program names); AllowExtra adds programs to it.
	Allow      []string `env:"THEFOLD_SANDBOX_ALLOW"`
	AllowExtra []string `env:"THEFOLD_SANDBOX_ALLOW_EXTRA"`
	// GoProxy, NPMRegistry and PipIndex are the package sources a command run with
	// NETWORK_POLICY_PACKAGES is pointed at; a language without one cannot install packages.
	GoProxy     string `env:"THEFOLD_SANDBOX_GOPROXY"`
	NPMRegistry string `env:"THEFOLD_SANDBOX_NPM_REGISTRY"`
	PipIndex    string `env:"THEFOLD_SANDBOX_PIP_INDEX"`
	// GoVulnDB is the Go vulnerability database (https://vuln.go.dev, or a mirror in its
	// format) that govulncheck, where the sandbox image has it, reads when run with
	// NETWORK_POLICY_PACKAGES: the sandbox passes it as govulncheck's -db, and the
	// command may reach it and the Go package source, nothing else. Empty: govulncheck
	// cannot read a database, and the repository monitor's vulnerability audit is skipped.
	GoVulnDB string `env:"THEFOLD_SANDBOX_GOVULNDB"`
	// Images maps a language to its docker image, over the built-in thefold-sandbox:local
	// that every language (go, python, typescript, javascript) gets by default; images a
	// caller may name are these and AllowedImages.
	Images        map[string]string `env:"THEFOLD_SANDBOX_IMAGES"`
	AllowedImages []string          `env:"THEFOLD_SANDBOX_ALLOWED_IMAGES"`
	// DockerBuildImage builds the built-in image at start (busybox, the host's Go
	// toolchain, and the files of the host's Debian packages for cgo, git, Python and
	// Node), and rebuilds it when they changed, since no registry may be reachable.
	DockerBuildImage bool `env:"THEFOLD_SANDBOX_DOCKER_BUILD_IMAGE, default=true"`
	// GoRoot is the host's Go toolchain, bound read-only into bwrap sandboxes and copied
	// into the docker image.
	GoRoot string `env:"THEFOLD_SANDBOX_GOROOT, default=/usr/local/go"`
	// WarmCacheDir is where bwrap sandboxes' shared Go build cache of the standard library
	// is made, once per toolchain, and mounted read-only into each sandbox (every build
	// writes only a private layer); empty means ~/.cache/thefold/sandbox-gocache, "off"
	// none (every sandbox then compiles the standard library itself). Docker sandboxes
	// have theirs in the image.
	WarmCacheDir string `env:"THEFOLD_SANDBOX_WARM_CACHE_DIR"`
	// Pool is how many started docker containers per image wait for new sandboxes, made
	// with the default limits (0 for none): creating a sandbox then takes one instead of
	// waiting for the engine. A pooled container serves one sandbox and is removed with
	// it, never reused.
	Pool int `env:"THEFOLD_SANDBOX_POOL, default=2"`
	// KubeNamespace holds the kubernetes backend's sandbox pods; empty: the namespace of
	// the pod the service runs in.
	KubeNamespace string `env:"THEFOLD_SANDBOX_KUBE_NAMESPACE"`
	// KubeImage is the image of the kubernetes backend's sandbox pods: the sandbox image
	// `make images` builds (every language's toolchain), pushed where the cluster's nodes
	// can pull it. It needs /bin/sh, tar, kill, timeout and env.
	KubeImage string `env:"THEFOLD_SANDBOX_KUBE_IMAGE, default=thefold-sandbox:local"`
	// KubeRuntimeClass is the sandbox pods' RuntimeClass (e.g. gvisor, kata); empty: the
	// cluster's default runtime.
	KubeRuntimeClass string `env:"THEFOLD_SANDBOX_KUBE_RUNTIME_CLASS"`
	// Kubeconfig is the kubeconfig file of the cluster the kubernetes backend makes its pods
	// in; empty: the cluster the service runs in (its service account).
	Kubeconfig string `env:"THEFOLD_SANDBOX_KUBECONFIG"`
	// KubeStartTimeout bounds the wait for a new sandbox pod to run (scheduling, image pull).
	KubeStartTimeout time.Duration `env:"THEFOLD_SANDBOX_KUBE_START_TIMEOUT, default=2m"`
}

var programName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$`)

// Validate collects every problem.
func (c *Config) Validate() error {
	var problems []error
	if !slices.Contains([]string{"auto", "kubernetes", "docker", "bwrap", "local"}, c.Backend) {
		problems = append(problems, fmt.Errorf("THEFOLD_SANDBOX_BACKEND: %q: want auto, kubernetes, docker, bwrap or local", c.Backend))
	}
	for _, b := range c.Offer {
		if b != "docker" && b != "bwrap" && b != "kubernetes" {
			problems = append(problems, fmt.Errorf("THEFOLD_SANDBOX_BACKENDS: %q: want kubernetes, docker and/or bwrap (local is THEFOLD_SANDBOX_ALLOW_LOCAL)", b))
		}
	}
	if (c.Backend == "docker" || c.Backend == "bwrap" || c.Backend == "kubernetes") && !slices.Contains(c.Offer, c.Backend) {
		problems = append(problems, fmt.Errorf("THEFOLD_SANDBOX_BACKEND: %s is not in THEFOLD_SANDBOX_BACKENDS (%v)", c.Backend, c.Offer))
	}
	if c.Backend == "auto" && len(c.Offer) == 0 && !c.AllowLocal {
		problems = append(problems, errors.New("THEFOLD_SANDBOX_BACKENDS: empty: no backend would be offered"))
	}
	if c.Backend == "local" && !c.AllowLocal {
		problems = append(problems, errors.New("THEFOLD_SANDBOX_BACKEND: local runs untrusted code without isolation; it needs THEFOLD_SANDBOX_ALLOW_LOCAL=true (development only)"))
	}
	if c.GoVulnDB != "" {
		if u, err := url.Parse(c.GoVulnDB); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			problems = append(problems, errors.New("THEFOLD_SANDBOX_GOVULNDB: want an http(s) URL without credentials (e.g. https://vuln.go.dev)"))
		}
	}
	positive := map[string]bool{
		"THEFOLD_SANDBOX_TTL": c.TTL > 0, "THEFOLD_SANDBOX_MAX_TTL": c.MaxTTL >= c.TTL,
		"THEFOLD_SANDBOX_MAX_PER_OWNER": c.MaxPerOwner > 0, "THEFOLD_SANDBOX_REAP_INTERVAL": c.ReapInterval > 0,
		"THEFOLD_SANDBOX_TIMEOUT": c.Timeout > 0, "THEFOLD_SANDBOX_MAX_TIMEOUT": c.MaxTimeout >= c.Timeout,
		"THEFOLD_SANDBOX_MAX_OUTPUT": c.MaxOutput >= 1024, "THEFOLD_SANDBOX_MEMORY": c.Memory >= 16<<20,
		"THEFOLD_SANDBOX_MAX_MEMORY": c.MaxMemory >= c.Memory, "THEFOLD_SANDBOX_CPUS": c.CPUs > 0,
		"THEFOLD_SANDBOX_PIDS": c.Pids >= 8, "THEFOLD_SANDBOX_MAX_PIDS": c.MaxPids >= c.Pids,
		"THEFOLD_SANDBOX_POOL":               c.Pool >= 0 && c.Pool <= 64,
		"THEFOLD_SANDBOX_KUBE_START_TIMEOUT": c.KubeStartTimeout > 0 || !slices.Contains(c.Offer, "kubernetes"),
		"THEFOLD_SANDBOX_MAX_FILE_BYTES":     c.MaxFileBytes > 0, "THEFOLD_SANDBOX_MAX_ARCHIVE_BYTES": c.MaxArchiveBytes >= c.MaxFileBytes,
	}
	for _, k := range slices.Sorted(maps.Keys(positive)) {
		if !positive[k] {
			problems = append(problems, fmt.Errorf("%s: out of range (positive; a MAX_ at least its default)", k))
		}
	}
	for _, p := range append(slices.Clone(c.Allow), c.AllowExtra...) {
		if !programName.MatchString(p) {
			problems = append(problems, fmt.Errorf("THEFOLD_SANDBOX_ALLOW(_EXTRA): %q is not a program name", p))
		}
	}
	return errors.Join(problems...)
}

// withDefaults fills what a test's zero Config leaves empty.
func (c Config) withDefaults() Config {
	if c.Dir == "" {
		if c.DataDir != "" {
			c.Dir = filepath.Join(c.DataDir, "sandboxes")
		} else {
			c.Dir = filepath.Join(os.TempDir(), "thefold-sandboxes")
		}
	}
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.TTL, 30*time.Minute)
	def(&c.MaxTTL, 24*time.Hour)
	def(&c.ReapInterval, time.Minute)
	def(&c.Timeout, 5*time.Minute)
	def(&c.MaxTimeout, 30*time.Minute)
	if c.GoRoot == "" {
		c.GoRoot = "/usr/local/go"
	}
	if c.Offer == nil {
		c.Offer = []string{"docker", "bwrap"}
	}
	if c.MaxPerOwner <= 0 {
		c.MaxPerOwner = 10
	}
	if c.MaxOutput <= 0 {
		c.MaxOutput = 1 << 20
	}
	if c.Memory <= 0 {
		c.Memory = 512 << 20
	}
	if c.MaxMemory < c.Memory {
		c.MaxMemory = max(c.Memory, 8<<30)
	}
	if c.CPUs <= 0 {
		c.CPUs = 2
	}
	c.CPUs = min(c.CPUs, maxCPUs())
	if c.Pids <= 0 {
		c.Pids = 256
	}
	if c.MaxPids < c.Pids {
		c.MaxPids = max(c.Pids, 4096)
	}
	if c.MaxFileBytes <= 0 {
		c.MaxFileBytes = 10 << 20
	}
	if c.MaxArchiveBytes <= 0 {
		c.MaxArchiveBytes = 512 << 20
	}
	if c.KubeImage == "" {
		c.KubeImage = kube.DefaultImage
	}
	def(&c.KubeStartTimeout, kube.DefaultStartTimeout)
	return c
}

// maxCPUs is the most a sandbox may ask for: the machine's cores.
func maxCPUs() float64 { return float64(runtime.NumCPU()) }
