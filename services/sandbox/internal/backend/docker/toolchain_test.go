package docker

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/thefold/thefold/services/sandbox/internal/backend"
)

// A sandbox's Go toolchain and shared build cache come from the toolchain volumes, read-only:
// the go command works, and writing into either fails.
func TestToolchainVolumesAreMountedReadOnly(t *testing.T) {
	t.Parallel()
	d, ws := sandbox(t, map[string]string{"go.mod": "module x\n\ngo 1.22\n", "main.go": "package main\n\nfunc main() {}\n"})
	res := run(t, d, ws, backend.Spec{Argv: sh(`
		test -f /usr/local/go/` + toolchainMarker + ` && echo goroot-volume
		test -f ` + SharedGoCache + `/` + toolchainMarker + ` && echo gocache-volume
		go build -o /dev/null . && echo built
		touch /usr/local/go/planted 2>/dev/null && echo wrote-goroot
		mkdir ` + SharedGoCache + `/ff 2>/dev/null && echo wrote-gocache
		true`)}, backend.Limits{})
	got := strings.Fields(string(res.Stdout))
	want := []string{"goroot-volume", "gocache-volume", "built"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("in the sandbox: %q (stderr %q); want %q", got, res.Stderr, want)
	}
}

// A volume whose copy did not finish (no marker) is emptied and filled again: nothing a
// previous fill left, or anything else put there, survives into what sandboxes mount.
func TestToolchainVolumeCutShortIsRefilled(t *testing.T) {
	if shared == nil {
		t.Skip(skipReason)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cli := shared.cli
	inspect, err := cli.ImageInspect(ctx, DefaultImage)
	if err != nil {
		t.Fatal(err)
	}
	// A test-only id: the volumes are its own, not the ones the other tests mount.
	id := "test" + strings.TrimPrefix(inspect.ID, "sha256:")[:12]
	removeVolumes := func() {
		for _, p := range toolchainPaths {
			_, _ = cli.VolumeRemove(context.Background(), toolchainVolume(id, p.slug), client.VolumeRemoveOptions{Force: true})
		}
	}
	// A killed run's fill container and volumes (marked): the test needs them new.
	orphan := "thefold-toolchain-fill-" + toolchainFormat + "-" + id
	_, _ = cli.ContainerRemove(ctx, orphan, client.ContainerRemoveOptions{Force: true})
	removeVolumes()
	t.Cleanup(removeVolumes)
	// A half-made volume: a planted file, no marker.
	vol := toolchainVolume(id, "goroot")
	if _, err := cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: vol}); err != nil {
		t.Fatal(err)
	}
	if _, err := runFill(ctx, cli, "thefold-toolchain-test-plant-"+id, DefaultImage,
		"mkdir -p /v/bin && echo planted > /v/bin/go && echo x > /v/junk",
		[]mount.Mount{{Type: mount.TypeVolume, Source: vol, Target: "/v"}}); err != nil {
		t.Fatal(err)
	}
	// And the fill container of an earlier fill whose process was killed: stopped, never
	// removed. It is taken for abandoned and removed, not waited for.
	created, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{Name: orphan,
		Config: &container.Config{Image: DefaultImage, Entrypoint: []string{"/bin/sh", "-c"}, Cmd: []string{"true"}, NetworkDisabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = cli.ContainerRemove(context.Background(), created.ID, client.ContainerRemoveOptions{Force: true})
	})
	if exit, _, err := runToEnd(ctx, cli, created.ID, "the abandoned fill"); err != nil || exit != 0 {
		t.Fatalf("the abandoned fill: exit %d, %v", exit, err)
	}
	mounts, err := makeToolchainVolumes(ctx, cli, DefaultImage, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(mounts) != len(toolchainPaths) {
		t.Fatalf("mounts %+v; want one per toolchain path", mounts)
	}
	out, err := runFill(ctx, cli, "thefold-toolchain-test-read-"+id, DefaultImage,
		"test -e /v/junk && echo junk; /v/bin/go version >/dev/null && echo go-runs; test -f /v/"+toolchainMarker+" && echo marked; true",
		[]mount.Mount{{Type: mount.TypeVolume, Source: vol, Target: "/v", ReadOnly: true}})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(strings.Fields(out), " "); got != "go-runs marked" {
		t.Fatalf("the refilled volume: %q; want the image's toolchain, marked, and nothing planted", got)
	}
	// Made again, a marked volume is kept as it is.
	if _, err := makeToolchainVolumes(ctx, cli, DefaultImage, id); err != nil {
		t.Fatal(err)
	}
}
