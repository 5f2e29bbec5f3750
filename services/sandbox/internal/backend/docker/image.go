package docker

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/moby/moby/client"

	"github.com/thefold/thefold/pkg/errs"
)

// GoImageSource says where BuildGoImage takes the image's files from. Zero fields take the
// defaults: Go from /usr/local/go, busybox from /bin/busybox or PATH.
type GoImageSource struct {
	GoRoot  string
	Busybox string
}

// goImageEnv is the image's environment: the toolchain first on PATH, every cache under the
// tmpfs /tmp (the root is read-only), and no module downloads (there is no network).
var goImageEnv = []string{
	"PATH=/usr/local/go/bin:/bin",
	"HOME=/tmp",
	"TMPDIR=/tmp",
	"GOCACHE=/tmp/gocache",
	"GOPATH=/tmp/gopath",
	"GOPROXY=off",
	"GOTOOLCHAIN=local",
	"GOFLAGS=-buildvcs=false",
	"LANG=C.UTF-8",
}

// BuildGoImage makes the Go sandbox image name without a registry: a root filesystem of
// busybox (static, with a link per applet) and a copy of the Go toolchain, streamed as a tar
// into the engine's image import. It does nothing when the image already exists, so the
// service and `make setup` can call it on every start.
func BuildGoImage(ctx context.Context, cli *client.Client, name string, src GoImageSource) error {
	if _, err := cli.ImageInspect(ctx, name); err == nil {
		return nil
	}
	if src.GoRoot == "" {
		src.GoRoot = "/usr/local/go"
	}
	if src.Busybox == "" {
		src.Busybox = "/bin/busybox"
		if _, err := os.Stat(src.Busybox); err != nil {
			p, err := exec.LookPath("busybox")
			if err != nil {
				return fmt.Errorf("busybox not found (install busybox-static): %w", errs.ErrFailedPrecondition)
			}
			src.Busybox = p
		}
	}
	if _, err := os.Stat(filepath.Join(src.GoRoot, "bin", "go")); err != nil {
		return fmt.Errorf("go toolchain %q: %w: %w", src.GoRoot, err, errs.ErrFailedPrecondition)
	}
	out, err := exec.CommandContext(ctx, src.Busybox, "--list").Output()
	if err != nil {
		return fmt.Errorf("busybox %q --list: %w: %w", src.Busybox, err, errs.ErrFailedPrecondition)
	}
	applets := strings.Fields(string(out))

	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeGoRootfs(pw, src, applets)) }()
	changes := []string{"LABEL org.thefold.sandbox=go", "WORKDIR /workspace", `CMD ["/bin/sleep","2147483647"]`}
	for _, e := range goImageEnv {
		changes = append(changes, "ENV "+e)
	}
	rc, err := cli.ImageImport(ctx, client.ImageImportSource{Source: pr, SourceName: "-"}, name,
		client.ImageImportOptions{Changes: changes, Message: "thefold go sandbox"})
	if err != nil {
		pr.CloseWithError(err)
		return fmt.Errorf("import image %q: %w: %w", name, err, errs.ErrUnavailable)
	}
	defer rc.Close()
	// The import reports progress and failures as a JSON stream; read it to the end so the
	// import finishes, then check that the image is there.
	body, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Errorf("import image %q: %w: %w", name, err, errs.ErrUnavailable)
	}
	if _, err := cli.ImageInspect(ctx, name); err != nil {
		return fmt.Errorf("import image %q: not created (%s): %w", name, strings.TrimSpace(string(body)), errs.ErrUnavailable)
	}
	return nil
}

// writeGoRootfs writes the image's root filesystem as a tar stream.
func writeGoRootfs(w io.Writer, src GoImageSource, applets []string) error {
	tw := tar.NewWriter(w)
	dir := func(name string, mode int64) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode})
	}
	for _, d := range []string{"bin/", "etc/", "usr/", "usr/local/", "dev/", "proc/", "sys/"} {
		if err := dir(d, 0o755); err != nil {
			return err
		}
	}
	// /tmp and /workspace are mounted over at run time; they exist so the mounts have a target.
	if err := dir("tmp/", 0o1777); err != nil {
		return err
	}
	if err := dir("workspace/", 0o755); err != nil {
		return err
	}
	if err := addFile(tw, src.Busybox, "bin/busybox", 0o755); err != nil {
		return err
	}
	for _, a := range applets {
		if a == "busybox" || strings.Contains(a, "/") {
			continue
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + a, Linkname: "busybox", Mode: 0o777}); err != nil {
			return err
		}
	}
	// The sandbox user needs a name for tools that look it up (go, git).
	for name, body := range map[string]string{
		"etc/passwd": "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/tmp:/bin/sh\n",
		"etc/group":  "root:x:0:\nnogroup:x:65534:\n",
	} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(body))}); err != nil {
			return err
		}
		if _, err := io.WriteString(tw, body); err != nil {
			return err
		}
	}
	err := filepath.WalkDir(src.GoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src.GoRoot, p)
		name := filepath.ToSlash(filepath.Join("usr/local/go", rel))
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return dir(name+"/", int64(info.Mode().Perm()))
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777})
		case d.Type().IsRegular():
			return addFile(tw, p, name, int64(info.Mode().Perm()))
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

func addFile(tw *tar.Writer, src, name string, mode int64) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: fi.Size()}); err != nil {
		return err
	}
	_, err = io.CopyN(tw, f, fi.Size())
	return err
}
