package docker

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/thefold/thefold/pkg/errs"
)

// Toolchain volumes: the image's Go toolchain and its shared build cache, copied once into
// named volumes and mounted read-only into every sandbox of the image, at the paths the
// image has them.
//
// Why: a go command reads much of GOROOT (every imported package's sources are hashed
// for its build) and of the shared cache on every run. Read through the image's layers,
// each read goes through the engine's storage driver, which on engines with
// fuse-overlayfs (a user-space file system, common where overlay2 cannot run) costs a
// round trip to a daemon per file operation: there, `go build` of a small package took
// 1.2–2.0 s and `go vet` 0.8 s, against 0.65–0.9 s and 0.3 s from volumes, which the engine
// keeps on its own file system. On overlay2 the volumes cost nothing and change little.
//
// Isolation is what the image gives: the volumes hold the image's own files, copied by
// the service in a container of that image that runs no sandbox code, and every sandbox
// mounts them read-only (as the image's read-only root was). A volume is named by the
// image's id, so a rebuilt image gets new volumes; one is used only once its copy has
// finished (a marker written last; a copy cut short is redone), and volumes of images no
// longer used are removed when nothing mounts them.
var toolchainPaths = []struct{ slug, path string }{
	{"goroot", "/usr/local/go"},
	{"gocache", SharedGoCache},
}

const (
	labelToolchain      = "org.thefold.sandbox.toolchain"
	labelToolchainImage = "org.thefold.sandbox.toolchain.image"
	// toolchainMarker is written into a volume after its copy: without it the copy is redone.
	toolchainMarker = ".thefold-toolchain-complete"
	// toolchainFormat versions the volumes' layout: change it with the copy.
	toolchainFormat = "1"
)

// WithToolchainVolumes turns the toolchain volumes on or off (default on).
func WithToolchainVolumes(on bool) Option { return func(c *config) { c.noToolchainVolumes = !on } }

// toolchains holds, per image reference, the mounts of its toolchain volumes once made.
type toolchains struct {
	mu   sync.Mutex
	byID map[string]*toolchainEntry // by image id
}

type toolchainEntry struct {
	mu     sync.Mutex // held while the volumes are made: the image's other sandboxes wait
	done   bool
	mounts []mount.Mount
	failed time.Time // when making them last failed: tried again toolchainRetry after
}

// toolchainRetry is how long after a failure the volumes are tried again. A failure was
// once cached for the process's life, and a passing fault (the engine busy with several
// services filling at once) left every later sandbox of a long-running service reading the
// toolchain from the image.
const toolchainRetry = time.Minute

// toolchainMounts returns the read-only mounts of image's toolchain volumes, making the
// volumes the first time (per process; a volume another process made is checked, not
// copied again). An image without the toolchain's paths gets none for them. A failure is
// logged and answered with no mounts: the sandbox then reads the same files from the image.
func (d *Docker) toolchainMounts(ctx context.Context, image string) []mount.Mount {
	if d.cfg.noToolchainVolumes {
		return nil
	}
	inspect, err := d.cli.ImageInspect(ctx, image)
	if err != nil {
		return nil // create reports the missing image
	}
	id := strings.TrimPrefix(inspect.ID, "sha256:")
	if len(id) > 16 {
		id = id[:16]
	}
	d.tools.mu.Lock()
	if d.tools.byID == nil {
		d.tools.byID = map[string]*toolchainEntry{}
	}
	e, ok := d.tools.byID[id]
	if !ok {
		e = &toolchainEntry{}
		d.tools.byID[id] = e
	}
	d.tools.mu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.done || (!e.failed.IsZero() && time.Since(e.failed) < toolchainRetry) {
		return e.mounts
	}
	// Not the caller's context: a cancelled request must not leave the entry failed.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
	defer cancel()
	mounts, err := makeToolchainVolumes(fctx, d.cli, image, id)
	if err != nil {
		e.failed = time.Now()
		d.cfg.logger.Warn("sandbox toolchain volumes: not used for now (tried again in a minute); sandboxes read the toolchain from the image",
			"image", image, "err", err)
		return nil
	}
	e.mounts, e.done = mounts, true
	removeStaleToolchains(fctx, d.cli, id)
	return e.mounts
}

// toolchainVolume is the name of image id's volume for slug.
func toolchainVolume(id, slug string) string {
	return "thefold-toolchain-" + toolchainFormat + "-" + id + "-" + slug
}

// makeToolchainVolumes makes (or checks) the volumes of image id and returns their mounts.
// One container of the image does it: for each path, a volume without the marker is
// emptied, filled with a copy of the path and marked. Two services doing it at once are
// kept apart by the container's name: the second waits for the first, then checks.
func makeToolchainVolumes(ctx context.Context, cli *client.Client, image, id string) ([]mount.Mount, error) {
	var script strings.Builder
	script.WriteString("set -e\n")
	var fill []mount.Mount
	var mounts []mount.Mount
	for _, p := range toolchainPaths {
		vol := toolchainVolume(id, p.slug)
		if _, err := cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: vol,
			Labels: map[string]string{labelToolchain: p.slug, labelToolchainImage: id}}); err != nil {
			return nil, fmt.Errorf("create volume %s: %w", vol, err)
		}
		dst := "/thefold-fill/" + p.slug
		fill = append(fill, mount.Mount{Type: mount.TypeVolume, Source: vol, Target: dst})
		mounts = append(mounts, mount.Mount{Type: mount.TypeVolume, Source: vol, Target: p.path, ReadOnly: true,
			VolumeOptions: &mount.VolumeOptions{NoCopy: true}})
		// A path the image lacks gets an empty, marked volume, and is not mounted (below).
		fmt.Fprintf(&script, "if [ ! -f %[1]s/%[3]s ]; then\n"+
			"  rm -rf %[1]s/* %[1]s/.[!.]* %[1]s/..?*\n"+
			"  if [ -d %[2]s ]; then cp -a %[2]s/. %[1]s/; else touch %[1]s/.absent; fi\n"+
			"  touch %[1]s/%[3]s\nfi\n"+
			"if [ -f %[1]s/.absent ]; then echo absent %[4]s; fi\n", dst, p.path, toolchainMarker, p.slug)
	}
	name := "thefold-toolchain-fill-" + toolchainFormat + "-" + id
	out, err := runFill(ctx, cli, name, image, script.String(), fill)
	if err != nil {
		return nil, err
	}
	var used []mount.Mount
	for i, p := range toolchainPaths {
		if !strings.Contains(out, "absent "+p.slug) {
			used = append(used, mounts[i])
		}
	}
	return used, nil
}

// runFill runs script in a container named name of image with the volumes mounted, and
// returns its output. If a container of that name exists (another service is filling), it
// waits for it to end and runs its own after (which then finds the volumes marked).
func runFill(ctx context.Context, cli *client.Client, name, image, script string, mounts []mount.Mount) (string, error) {
	for {
		created, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
			Name: name,
			Config: &container.Config{
				Image:           image,
				User:            "0:0",
				Entrypoint:      []string{"/bin/sh", "-c"},
				Cmd:             []string{script},
				NetworkDisabled: true,
				Labels:          map[string]string{labelSandbox + ".toolchain-fill": "true"},
			},
			HostConfig: &container.HostConfig{
				NetworkMode: "none",
				// Root in a container without capabilities may still write the volumes,
				// which it owns, and copy root's files keeping their owner.
				CapDrop:     []string{"ALL"},
				SecurityOpt: []string{"no-new-privileges"},
				Mounts:      mounts,
			},
		})
		if cerrdefs.IsConflict(err) {
			// Another fill of the same volumes, by another service (several starting at once
			// on one engine take turns, for as long as ctx allows): wait for it to end and be
			// removed by its owner, then run ours, which finds the volumes marked.
			if err := awaitFill(ctx, cli, name); err != nil {
				return "", err
			}
			continue
		}
		if err != nil {
			return "", fmt.Errorf("create the toolchain volumes' container: %w: %w", err, errs.ErrUnavailable)
		}
		defer func() {
			_, _ = cli.ContainerRemove(context.WithoutCancel(ctx), created.ID, client.ContainerRemoveOptions{Force: true})
		}()
		exit, out, err := runToEnd(ctx, cli, created.ID, "the toolchain volumes' container")
		if err != nil {
			return "", err
		}
		if exit != 0 {
			return "", fmt.Errorf("fill the toolchain volumes: exit %d: %s: %w", exit, strings.TrimSpace(out), errs.ErrFailedPrecondition)
		}
		return out, nil
	}
}

// How long a fill container may stand still before it is taken for one whose owner died
// (killed while it waited for the container, so its removal never ran): stopped, 5 s (an
// owner removes its container as soon as it has read the output); created and not started,
// a minute (an engine storing images with fuse-overlayfs took seconds to start one).
const (
	fillOrphanAfter          = 5 * time.Second
	fillUnstartedOrphanAfter = time.Minute
)

// awaitFill waits until the fill container name is gone. One left stopped for
// fillOrphanAfter is removed here: waiting for its owner to remove it would wait forever
// (a killed test run left one, and every later fill of those volumes hung until its
// deadline).
func awaitFill(ctx context.Context, cli *client.Client, name string) error {
	var stoppedSince time.Time
	for {
		in, err := cli.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
		switch {
		case cerrdefs.IsNotFound(err):
			return nil
		case err != nil:
			return fmt.Errorf("inspect the toolchain volumes' container: %w: %w", err, errs.ErrUnavailable)
		case in.Container.State != nil && in.Container.State.Running:
			stoppedSince = time.Time{}
		case stoppedSince.IsZero():
			stoppedSince = time.Now()
		case time.Since(stoppedSince) >= fillOrphanAfter && (in.Container.State == nil || in.Container.State.Status != "created" ||
			time.Since(stoppedSince) >= fillUnstartedOrphanAfter):
			_, err := cli.ContainerRemove(ctx, name, client.ContainerRemoveOptions{Force: true})
			if err != nil && !cerrdefs.IsNotFound(err) {
				return fmt.Errorf("remove an abandoned toolchain volumes' container: %w: %w", err, errs.ErrUnavailable)
			}
			return nil
		}
		select {
		case <-time.After(250 * time.Millisecond):
		case <-ctx.Done():
			return fmt.Errorf("wait for another fill of the toolchain volumes: %w", ctx.Err())
		}
	}
}

// runToEnd starts the created container id, waits for it to stop, and returns its exit
// code and the last 30 lines of its output; what names it in errors.
func runToEnd(ctx context.Context, cli *client.Client, id, what string) (int64, string, error) {
	if _, err := cli.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		return 0, "", fmt.Errorf("start %s: %w: %w", what, err, errs.ErrUnavailable)
	}
	wait := cli.ContainerWait(ctx, id, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	var exit int64
	select {
	case r := <-wait.Result:
		exit = r.StatusCode
	case err := <-wait.Error:
		return 0, "", fmt.Errorf("wait for %s: %w: %w", what, err, errs.ErrUnavailable)
	case <-ctx.Done():
		return 0, "", ctx.Err()
	}
	var out bytes.Buffer
	if logs, err := cli.ContainerLogs(ctx, id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Tail: "30"}); err == nil {
		_, _ = stdcopy.StdCopy(&out, &out, logs)
		logs.Close()
	}
	return exit, out.String(), nil
}

// removeStaleToolchains removes the toolchain volumes of images that are gone (rebuilt
// under the same name, or removed). Volumes of an image that still exists stay: another
// service on the same engine may use it, and a mount of a removed volume would give its
// sandboxes an empty one. The engine refuses to remove a volume a container mounts.
func removeStaleToolchains(ctx context.Context, cli *client.Client, id string) {
	list, err := cli.VolumeList(ctx, client.VolumeListOptions{Filters: make(client.Filters).Add("label", labelToolchain)})
	if err != nil {
		return
	}
	for _, v := range list.Items {
		img := v.Labels[labelToolchainImage]
		if img == id || img == "" || !strings.HasPrefix(v.Name, "thefold-toolchain-") {
			continue
		}
		if _, err := cli.ImageInspect(ctx, "sha256:"+img); err == nil || !cerrdefs.IsNotFound(err) {
			continue
		}
		_, _ = cli.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{})
	}
}
