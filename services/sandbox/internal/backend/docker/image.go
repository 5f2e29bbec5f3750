package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/moby/moby/client"

	"github.com/thefold/thefold/pkg/errs"
	"github.com/thefold/thefold/services/sandbox/internal/backend"
)

// DefaultImage is the image BuildImage makes: one image with every language's toolchain.
const DefaultImage = "thefold-sandbox:local"

// ImageSpecLabel is the image label holding the hash of what the image was made of (the
// package versions, the Go and busybox versions, the layout); BuildImage rebuilds an image
// whose label differs from what the host would make now.
const ImageSpecLabel = "org.thefold.sandbox.image-spec"

// DefaultImages maps each language the service knows to the image that has its toolchain.
func DefaultImages() map[string]string {
	return map[string]string{"go": DefaultImage, "python": DefaultImage, "typescript": DefaultImage, "javascript": DefaultImage}
}

// ImageSource says what BuildImage takes the image's files from. Zero fields take the
// defaults: Go from /usr/local/go, busybox from /bin/busybox or PATH, DefaultPackages and
// OptionalPackages.
type ImageSource struct {
	GoRoot  string
	Busybox string
	// Packages are installed Debian packages whose files, with those of everything they
	// depend on, go into the image; each must be installed.
	Packages []string
	// OptionalPackages are added when installed.
	OptionalPackages []string
	// Programs are host programs (a name looked up on the host's PATH, or a path) copied
	// into the image's /usr/local/bin when the host has them; nil takes DefaultPrograms.
	Programs []string
	// Cold leaves out the shared Go build cache (and its GOCACHEPROG helper): every
	// sandbox then compiles the standard library itself. Warming runs the image's own Go
	// toolchain, so an image of a stand-in toolchain must be cold.
	Cold bool
}

// GoImageSource is what BuildGoImage takes.
//
// Deprecated: use ImageSource with BuildImage.
type GoImageSource struct {
	GoRoot  string
	Busybox string
}

// imageEnv is the image's environment: the toolchains on PATH, every cache and home under
// the tmpfs /tmp (the root is read-only), and no downloads (there is no network).
var imageEnv = []string{
	"PATH=/usr/local/go/bin:/usr/local/bin:/usr/bin:/bin",
	"HOME=/tmp",
	"TMPDIR=/tmp",
	"GOCACHE=/tmp/gocache",
	"GOPATH=/tmp/gopath",
	"GOPROXY=off",
	"GOTOOLCHAIN=local",
	// cgo works (gcc is in the image) for code that imports "C", but net and os/user use
	// their pure-Go versions: with gcc present Go would compile their cgo parts into every
	// program that touches the network, in every cold sandbox, which made a one-file task's
	// build minutes slower in half a CPU. A command's own -tags replaces these.
	"GOFLAGS=-buildvcs=false -tags=netgo,osusergo",
	"LANG=C.UTF-8",
	"PYTHONDONTWRITEBYTECODE=1",
	// Debian installs Node modules (typescript, eslint and their dependencies) where only
	// its own node looks by default; NodeSource's node finds them through NODE_PATH.
	"NODE_PATH=/usr/share/nodejs:/usr/lib/nodejs",
	"npm_config_cache=/tmp/npm",
	// npm asks the registry for a newer npm after a command; there is no network.
	"npm_config_update_notifier=false",
}

// BuildGoImage builds the sandbox image; it now holds every language's toolchain.
//
// Deprecated: use BuildImage.
func BuildGoImage(ctx context.Context, cli *client.Client, name string, src GoImageSource) error {
	return BuildImage(ctx, cli, name, ImageSource{GoRoot: src.GoRoot, Busybox: src.Busybox})
}

// BuildImage makes the sandbox image name without a registry: a root filesystem of the
// host's Go toolchain, the files of the host's Debian packages that make gcc, git, Python
// (pip, pytest) and Node (npm, tsc) work, and busybox for the shell and the utilities no
// package brings, streamed as a tar into the engine's image import. An image of that name
// made of the same (its ImageSpecLabel) is kept, so the service and `make setup` can call
// it on every start; one made of something else is replaced. Concurrent builds on one
// machine (test binaries of several packages) wait for each other.
func BuildImage(ctx context.Context, cli *client.Client, name string, src ImageSource) error {
	unlock, err := lockBuild(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	var oldID string
	existing, inspectErr := cli.ImageInspect(ctx, name)
	if inspectErr == nil {
		oldID = existing.ID
	}
	plan, err := planImage(ctx, src)
	if err != nil {
		// A machine without dpkg (the service in a container) cannot make the image: it
		// uses the one it was given.
		if inspectErr == nil && errNoDpkg(err) {
			return nil
		}
		return err
	}
	spec := plan.spec
	var seed map[string]string
	var seedCmds [][]string
	if !src.Cold {
		if seed, seedCmds, err = backend.GoCacheSeed(ctx, plan.goRoot); err != nil {
			return err
		}
		spec = warmSpec(plan.spec, seed, seedCmds)
	}
	if inspectErr == nil && existing.Config != nil && existing.Config.Labels[ImageSpecLabel] == spec {
		return nil
	}
	// A warm image is the imported one with the seed's build cache on top: the import goes
	// under a temporary reference first.
	ref := name
	if !src.Cold {
		ref = tempReference()
		defer func() { _, _ = cli.ImageRemove(context.WithoutCancel(ctx), ref, client.ImageRemoveOptions{}) }()
	}
	applets, err := busyboxApplets(ctx, plan.busybox)
	if err != nil {
		return err
	}

	pr, pw := io.Pipe()
	werr := make(chan error, 1)
	go func() {
		err := plan.writeRootfs(pw, applets)
		pw.CloseWithError(err)
		werr <- err
	}()
	changes := []string{
		"LABEL " + ImageSpecLabel + "=" + plan.spec,
		"WORKDIR /workspace",
		`CMD ["/bin/sleep","2147483647"]`,
	}
	for _, e := range imageEnv {
		changes = append(changes, "ENV "+e)
	}
	msg := fmt.Sprintf("thefold sandbox: %s and %d Debian packages of the host", plan.goVersion, len(plan.packages))
	rc, err := cli.ImageImport(ctx, client.ImageImportSource{Source: pr, SourceName: "-"}, ref,
		client.ImageImportOptions{Changes: changes, Message: msg})
	var body []byte
	if err == nil {
		// The import reports progress and failures as a JSON stream; read it to the end
		// so the import finishes.
		body, err = io.ReadAll(rc)
		rc.Close()
	}
	pr.CloseWithError(io.ErrClosedPipe) // ends the writer if the engine stopped reading
	if wErr := <-werr; wErr != nil && !errors.Is(wErr, io.ErrClosedPipe) {
		// The stream broke off: whatever the engine made of it is not the image.
		if img, ierr := cli.ImageInspect(context.WithoutCancel(ctx), ref); ierr == nil && img.ID != oldID {
			_, _ = cli.ImageRemove(context.WithoutCancel(ctx), img.ID, client.ImageRemoveOptions{})
		}
		return fmt.Errorf("build image %q: %w", name, wErr)
	}
	if err != nil {
		return fmt.Errorf("import image %q: %w: %w", name, err, errs.ErrUnavailable)
	}
	if msg := importError(body); msg != "" {
		return fmt.Errorf("import image %q: %s: %w", name, msg, errs.ErrUnavailable)
	}
	if !src.Cold {
		if err := warmImage(ctx, cli, ref, name, plan.goRoot, spec, seed, seedCmds); err != nil {
			return err
		}
	}
	img, err := cli.ImageInspect(ctx, name)
	if err != nil || img.Config == nil || img.Config.Labels[ImageSpecLabel] != spec {
		return fmt.Errorf("import image %q: not created (%s): %w", name, strings.TrimSpace(string(body)), errs.ErrUnavailable)
	}
	// The replaced image is untagged now; remove it unless a container still uses it.
	if oldID != "" && oldID != img.ID {
		_, _ = cli.ImageRemove(ctx, oldID, client.ImageRemoveOptions{PruneChildren: true})
	}
	return nil
}

// importError is the first error the engine's import stream reports, if any.
func importError(body []byte) string {
	dec := json.NewDecoder(strings.NewReader(string(body)))
	for {
		var m struct {
			Error       string `json:"error"`
			ErrorDetail struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&m); err != nil {
			return ""
		}
		if m.ErrorDetail.Message != "" {
			return m.ErrorDetail.Message
		}
		if m.Error != "" {
			return m.Error
		}
	}
}

// lockBuild holds a machine-wide lock while an image is checked and built, so that test
// binaries started together build it once. The lock is best effort: a lock file that cannot
// be opened does not stop the build.
func lockBuild(ctx context.Context) (func(), error) {
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "thefold-sandbox-image.lock"), os.O_RDONLY|os.O_CREATE, 0o666)
	if err != nil {
		return func() {}, nil
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil // closing releases the lock
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return func() {}, nil
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("wait for another build of the sandbox image: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
