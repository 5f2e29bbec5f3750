package docker

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/thefold/thefold/pkg/errs"
)

// DefaultPackages are the Debian packages installed on the host whose files, with those of
// their dependencies, make the image's toolchains: cgo and git for go test, Python with
// pip and pytest, Node with tsc. dash is /bin/sh: busybox-static's shell runs its own
// applets before anything on PATH, so under it `tar` in a script (or the command the
// backend execs through sh) would be busybox's, not the packaged GNU tar.
var DefaultPackages = []string{"dash", "gcc", "libc6-dev", "git", "python3", "python3-pip", "python3-pytest", "nodejs", "node-typescript"}

// OptionalPackages are taken when the host has them installed: npm (when nodejs does not
// bundle it, as NodeSource's build does) and eslint.
var OptionalPackages = []string{"npm", "eslint"}

// DefaultPrograms are programs that come from no Debian package of bookworm, taken into the
// image when the host has them on its PATH: govulncheck (`make setup` installs it), for the
// repository monitor's vulnerability audit.
var DefaultPrograms = []string{"govulncheck"}

// requiredFiles are files an image with a package must hold, and the package that brings
// them when that one does not: NodeSource's nodejs bundles npm, Debian's does not.
var requiredFiles = []struct{ with, file, from string }{{"nodejs", "usr/bin/npm", "npm"}}

// rootfsFormat versions the layout writeRootfs produces: change it when the layout changes,
// so images built by an older version are rebuilt.
const rootfsFormat = "1"

// mergedUsr are the top-level directories that are links into /usr in the image (and on a
// merged-/usr host such as Debian bookworm); a file dpkg lists under one is written under
// its /usr path.
var mergedUsr = []string{"bin", "sbin", "lib", "lib32", "lib64", "libx32"}

// skipped are image paths left out to keep the image lean or because they mean nothing in
// a sandbox (documentation, translations, service units, ssh configuration).
var skipped = []string{
	"usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/lintian", "usr/share/doc-base",
	"usr/share/bug", "usr/share/menu", "usr/share/gdb", "etc/ssh", "etc/init.d", "etc/systemd",
	"usr/lib/systemd", "etc/logrotate.d", "etc/cron.d", "etc/cron.daily", "etc/cron.weekly",
}

func skippedPath(name string) bool {
	for _, p := range skipped {
		if name == p || strings.HasPrefix(name, p+"/") {
			return true
		}
	}
	// Translations: only the C locale's, and files such as locale.alias at the top (a
	// language's directory has no dot in its name: de, pt_BR, sr@latin).
	if rest, ok := strings.CutPrefix(name, "usr/share/locale/"); ok {
		top, _, sub := strings.Cut(rest, "/")
		return top != "C" && !strings.HasPrefix(top, "C.") && (sub || !strings.Contains(top, "."))
	}
	return false
}

// dpkgPackage is one installed package as dpkg-query reports it.
type dpkgPackage struct {
	id      string // ${binary:Package}: name, or name:arch for a Multi-Arch: same package
	name    string
	arch    string
	version string
	// deps are the Pre-Depends and Depends: each element one clause, its alternatives in order.
	deps [][]string
}

// dpkgDB is the host's installed packages, from one dpkg-query.
type dpkgDB struct {
	byName    map[string][]*dpkgPackage
	providers map[string][]*dpkgPackage
	native    string
}

const dpkgFormat = "${db:Status-Abbrev}\t${binary:Package}\t${Package}\t${Architecture}\t${Version}\t${Provides}\t${Pre-Depends}, ${Depends}\n"

// readDpkgDB lists every installed package with one dpkg-query.
func readDpkgDB(ctx context.Context) (*dpkgDB, error) {
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "dpkg-query", "-W", "-f", dpkgFormat)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("dpkg-query (the image is made of the host's Debian packages): %w: %s: %w", err, strings.TrimSpace(stderr.String()), errs.ErrFailedPrecondition)
	}
	return parseDpkgDB(out), nil
}

func parseDpkgDB(out []byte) *dpkgDB {
	db := &dpkgDB{byName: map[string][]*dpkgPackage{}, providers: map[string][]*dpkgPackage{}}
	for line := range strings.Lines(string(out)) {
		f := strings.Split(strings.TrimSuffix(line, "\n"), "\t")
		// Status-Abbrev is want, state, error: state 'i' is installed.
		if len(f) != 7 || len(f[0]) < 2 || f[0][1] != 'i' {
			continue
		}
		p := &dpkgPackage{id: f[1], name: f[2], arch: f[3], version: f[4], deps: parseDepends(f[6])}
		db.byName[p.name] = append(db.byName[p.name], p)
		for _, alts := range parseDepends(f[5]) {
			for _, v := range alts {
				db.providers[v] = append(db.providers[v], p)
			}
		}
		if p.name == "dpkg" {
			db.native = p.arch
		}
	}
	return db
}

// parseDepends splits a Depends field into clauses of alternatives, each a bare package
// name: version constraints, architecture qualifiers (:any, :amd64) and restrictions go.
func parseDepends(s string) [][]string {
	var out [][]string
	for clause := range strings.SplitSeq(s, ",") {
		var alts []string
		for alt := range strings.SplitSeq(clause, "|") {
			name := strings.TrimSpace(alt)
			if i := strings.IndexAny(name, " (["); i >= 0 {
				name = name[:i]
			}
			name, _, _ = strings.Cut(name, ":")
			if name != "" {
				alts = append(alts, name)
			}
		}
		if len(alts) > 0 {
			out = append(out, alts)
		}
	}
	return out
}

// lookup is the installed package that satisfies name for a package of arch: a real one
// (of the same architecture when several are installed), else one that provides it.
func (db *dpkgDB) lookup(name, arch string) *dpkgPackage {
	ps := db.byName[name]
	if len(ps) == 0 {
		ps = db.providers[name]
	}
	if len(ps) == 0 {
		return nil
	}
	for _, want := range []string{arch, db.native, "all"} {
		for _, p := range ps {
			if p.arch == want {
				return p
			}
		}
	}
	return ps[0]
}

// closure is roots with everything they depend on, recursively; an alternative takes its
// first installed choice. A root not installed is an error naming the apt-get command that
// installs every missing one; optional roots not installed are left out.
func (db *dpkgDB) closure(roots, optional []string) ([]*dpkgPackage, error) {
	var missing []string
	var queue []*dpkgPackage
	for _, r := range roots {
		if p := db.lookup(r, db.native); p != nil {
			queue = append(queue, p)
		} else {
			missing = append(missing, r)
		}
	}
	if len(missing) > 0 {
		return nil, missingPackages(missing)
	}
	for _, r := range optional {
		if p := db.lookup(r, db.native); p != nil {
			queue = append(queue, p)
		}
	}
	seen := map[*dpkgPackage]bool{}
	var out []*dpkgPackage
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		out = append(out, p)
		for _, alts := range p.deps {
			for _, a := range alts {
				if d := db.lookup(a, p.arch); d != nil {
					queue = append(queue, d)
					break
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b *dpkgPackage) int { return strings.Compare(a.id, b.id) })
	return out, nil
}

func missingPackages(names []string) error {
	s := "s"
	if len(names) == 1 {
		s = ""
	}
	return fmt.Errorf("the sandbox image is made of this host's packages, and package%s %s %s not installed: install with `sudo apt-get install --no-install-recommends %s` (or run scripts/setup.sh): %w",
		s, strings.Join(names, ", "), map[bool]string{true: "is", false: "are"}[len(names) == 1], strings.Join(names, " "), errs.ErrFailedPrecondition)
}

// imagePlan is what an image is made of, and the hash that identifies it.
type imagePlan struct {
	goRoot    string
	goVersion string
	busybox   string
	bbVersion string
	packages  []*dpkgPackage
	// programs are the host files of ImageSource.Programs found, by the name they have in
	// /usr/local/bin.
	programs map[string]string
	spec     string
}

// planImage resolves src's defaults and the package closure, and hashes the result. It
// reads the dpkg database once and runs busybox once: it is the fast path of BuildImage
// when the image is up to date.
func planImage(ctx context.Context, src ImageSource) (*imagePlan, error) {
	p := &imagePlan{goRoot: src.GoRoot, busybox: src.Busybox}
	if p.goRoot == "" {
		p.goRoot = "/usr/local/go"
	}
	if r, err := filepath.EvalSymlinks(p.goRoot); err == nil {
		p.goRoot = r
	}
	if _, err := os.Stat(filepath.Join(p.goRoot, "bin", "go")); err != nil {
		return nil, fmt.Errorf("go toolchain %q: %w: %w", p.goRoot, err, errs.ErrFailedPrecondition)
	}
	p.goVersion = goVersion(ctx, p.goRoot)
	if p.busybox == "" {
		p.busybox = "/bin/busybox"
		if _, err := os.Stat(p.busybox); err != nil {
			bb, err := exec.LookPath("busybox")
			if err != nil {
				return nil, fmt.Errorf("busybox not found (install busybox-static): %w", errs.ErrFailedPrecondition)
			}
			p.busybox = bb
		}
	}
	// `busybox --help` starts with its version ("BusyBox v1.35.0 (Debian …) multi-call
	// binary."), on stderr; it exits 0 or 1 depending on the build, so only the text counts.
	help, _ := exec.CommandContext(ctx, p.busybox, "--help").CombinedOutput()
	p.bbVersion, _, _ = strings.Cut(string(help), "\n")
	if !strings.HasPrefix(p.bbVersion, "BusyBox") {
		return nil, fmt.Errorf("busybox %q: not a busybox binary (--help printed %q): %w", p.busybox, p.bbVersion, errs.ErrFailedPrecondition)
	}
	roots, optional := src.Packages, src.OptionalPackages
	if roots == nil {
		roots = DefaultPackages
	}
	if optional == nil {
		optional = OptionalPackages
	}
	db, err := readDpkgDB(ctx)
	if err != nil {
		return nil, err
	}
	if p.packages, err = db.closure(roots, optional); err != nil {
		return nil, err
	}

	h := sha256.New()
	fmt.Fprintf(h, "format %s\ngo %s\nbusybox %s\n", rootfsFormat, p.goVersion, p.bbVersion)
	for _, e := range imageEnv {
		fmt.Fprintf(h, "env %s\n", e)
	}
	for _, pkg := range p.packages {
		fmt.Fprintf(h, "package %s %s\n", pkg.id, pkg.version)
	}
	programs := src.Programs
	if programs == nil {
		programs = DefaultPrograms
	}
	if p.programs, err = hostPrograms(programs, h); err != nil {
		return nil, err
	}
	p.spec = hex.EncodeToString(h.Sum(nil))
	return p, nil
}

// hostPrograms finds the host's files of programs (those it does not have are left out)
// and writes each one's name and content hash into h.
func hostPrograms(programs []string, h io.Writer) (map[string]string, error) {
	found := map[string]string{}
	for _, prog := range programs {
		file, err := exec.LookPath(prog)
		if err != nil {
			continue
		}
		if file, err = filepath.EvalSymlinks(file); err != nil {
			continue
		}
		f, err := os.Open(file)
		if err != nil {
			return nil, fmt.Errorf("program %s: %w", prog, err)
		}
		ph := sha256.New()
		_, err = io.Copy(ph, f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("program %s: %w", prog, err)
		}
		name := filepath.Base(prog)
		found[name] = file
		fmt.Fprintf(h, "program %s %x\n", name, ph.Sum(nil))
	}
	return found, nil
}

// goVersion is the toolchain's version from its VERSION file, else from `go env`.
func goVersion(ctx context.Context, goRoot string) string {
	if b, err := os.ReadFile(filepath.Join(goRoot, "VERSION")); err == nil {
		v, _, _ := strings.Cut(string(b), "\n")
		return strings.TrimSpace(v)
	}
	out, _ := exec.CommandContext(ctx, filepath.Join(goRoot, "bin", "go"), "env", "GOVERSION").Output()
	return strings.TrimSpace(string(out))
}

// rootfs writes the image's root filesystem into a tar stream. Paths are image paths:
// relative, slash-separated, without a trailing slash.
type rootfs struct {
	tw      *tar.Writer
	written map[string]byte // path → tar type flag
	links   map[[2]uint64]string
	buf     []byte
}

func newRootfs(w io.Writer) *rootfs {
	return &rootfs{tw: tar.NewWriter(w), written: map[string]byte{}, links: map[[2]uint64]string{}, buf: make([]byte, 1<<20)}
}

// mode keeps the permission and sticky bits: set-id bits mean nothing under
// no-new-privileges, and the image carries none.
func mode(fi fs.FileInfo) int64 {
	m := int64(fi.Mode().Perm())
	if fi.Mode()&fs.ModeSticky != 0 {
		m |= 0o1000
	}
	return m
}

// parents writes the directories above name that are not written yet. It reports false
// when one of them is a symlink: what lies below is reached through the link's target.
func (r *rootfs) parents(name string) (bool, error) {
	dir := path.Dir(name)
	if dir == "." {
		return true, nil
	}
	switch r.written[dir] {
	case tar.TypeDir:
		return true, nil
	case tar.TypeSymlink:
		return false, nil
	case 0:
		ok, err := r.parents(dir)
		if !ok || err != nil {
			return ok, err
		}
		return true, r.header(&tar.Header{Typeflag: tar.TypeDir, Name: dir + "/", Mode: 0o755})
	}
	return false, nil
}

func (r *rootfs) header(h *tar.Header) error {
	name := strings.TrimSuffix(h.Name, "/")
	r.written[name] = h.Typeflag
	h.Format = tar.FormatPAX
	return r.tw.WriteHeader(h)
}

// entry writes h (its Name without a trailing slash) unless its path is written already,
// skipped, or below a symlink; it reports whether it did.
func (r *rootfs) entry(h *tar.Header) (bool, error) {
	if _, done := r.written[h.Name]; done || skippedPath(h.Name) {
		return false, nil
	}
	if ok, err := r.parents(h.Name); !ok || err != nil {
		return false, err
	}
	if h.Typeflag == tar.TypeDir {
		h.Name += "/"
	}
	return true, r.header(h)
}

func (r *rootfs) dir(name string, mode int64) error {
	_, err := r.entry(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode})
	return err
}

func (r *rootfs) symlink(name, target string) error {
	_, err := r.entry(&tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777})
	return err
}

func (r *rootfs) bytes(name string, mode int64, body string) error {
	ok, err := r.entry(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(body))})
	if ok {
		_, err = io.WriteString(r.tw, body)
	}
	return err
}

// add writes the host file host at name: a directory (without its contents), a symlink
// as it is, a regular file (a hard link to one already written as a link). Anything else,
// and anything that cannot be read, is left out.
func (r *rootfs) add(host, name string) error {
	fi, err := os.Lstat(host)
	if err != nil {
		return nil
	}
	h := &tar.Header{Name: name, Mode: mode(fi), ModTime: fi.ModTime()}
	switch {
	case fi.IsDir():
		h.Typeflag = tar.TypeDir
		_, err := r.entry(h)
		return err
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(host)
		if err != nil {
			return nil
		}
		h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, target, 0o777
		_, err = r.entry(h)
		return err
	case !fi.Mode().IsRegular():
		return nil
	}
	var key [2]uint64
	st, _ := fi.Sys().(*syscall.Stat_t)
	if st != nil && st.Nlink > 1 {
		key = [2]uint64{uint64(st.Dev), st.Ino}
		if first, ok := r.links[key]; ok {
			h.Typeflag, h.Linkname = tar.TypeLink, first
			_, err := r.entry(h)
			return err
		}
	}
	f, err := os.Open(host)
	if err != nil {
		return nil // unreadable: left out
	}
	defer f.Close()
	h.Typeflag, h.Size = tar.TypeReg, fi.Size()
	ok, err := r.entry(h)
	if !ok || err != nil {
		return err
	}
	if st != nil && st.Nlink > 1 {
		r.links[key] = name
	}
	// The header promised Size bytes: a file that shrank since is padded, one that grew cut.
	n, err := io.CopyBuffer(r.tw, io.LimitReader(f, h.Size), r.buf)
	if err != nil {
		return fmt.Errorf("read %s: %w", host, err)
	}
	for ; n < h.Size; n++ {
		if _, err := r.tw.Write([]byte{0}); err != nil {
			return err
		}
	}
	return nil
}

// tree writes the host directory host and everything below it at name.
func (r *rootfs) tree(host, name string) error {
	return filepath.WalkDir(host, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // absent or unreadable: left out
		}
		rel, _ := filepath.Rel(host, p)
		img := path.Join(name, filepath.ToSlash(rel))
		if skippedPath(img) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		return r.add(p, img)
	})
}

// imagePath maps a path dpkg lists to its path in the image: relative, and under /usr for
// one listed under a merged directory (/bin/ls → usr/bin/ls). The merged directories
// themselves map to "" (the image has its own links for them).
func imagePath(p string) string {
	p = strings.TrimPrefix(path.Clean(p), "/")
	top, rest, _ := strings.Cut(p, "/")
	if slices.Contains(mergedUsr, top) {
		if rest == "" {
			return ""
		}
		return "usr/" + top + "/" + rest
	}
	if p == "." {
		return ""
	}
	return p
}

// packageFiles are the files a package installed, from dpkg's list of them.
func packageFiles(pkg *dpkgPackage) ([]string, error) {
	var lastErr error
	for _, id := range []string{pkg.id, pkg.name, pkg.name + ":" + pkg.arch} {
		b, err := os.ReadFile(filepath.Join("/var/lib/dpkg/info", id+".list"))
		if err == nil {
			return strings.Split(strings.TrimSpace(string(b)), "\n"), nil
		}
		lastErr = err
	}
	return nil, fmt.Errorf("files of package %s: %w: %w", pkg.id, lastErr, errs.ErrFailedPrecondition)
}

// writeRootfs writes the image's root filesystem as a tar stream: the skeleton (merged-/usr
// links, /etc/passwd and group, mount points), the files of the packages, their compiled
// Python modules and the alternatives their links go through, the CA certificates, the Go
// toolchain, and busybox with a link per applet no package provides.
func (p *imagePlan) writeRootfs(w io.Writer, applets []string) error {
	r := newRootfs(w)
	for _, d := range []string{"usr", "usr/bin", "usr/lib", "usr/local", "usr/local/bin", "etc", "dev", "proc", "sys", "workspace"} {
		if err := r.dir(d, 0o755); err != nil {
			return err
		}
	}
	// /tmp and /workspace are mounted over at run time; they exist so the mounts have a target.
	if err := r.dir("tmp", 0o1777); err != nil {
		return err
	}
	for _, d := range mergedUsr {
		if _, err := os.Stat("/usr/" + d); err == nil || d != "lib32" && d != "libx32" {
			if err := r.dir("usr/"+d, 0o755); err != nil {
				return err
			}
			if err := r.symlink(d, "usr/"+d); err != nil {
				return err
			}
		}
	}
	// The sandbox user (and the keeper that owns the container's own processes) need a
	// name for tools that look it up (go, git, python's getpass).
	for name, body := range map[string]string{
		"etc/passwd": "root:x:0:0:root:/root:/bin/sh\nkeeper:x:65533:65533:sandbox keeper:/nonexistent:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/tmp:/bin/sh\n",
		"etc/group":  "root:x:0:\nkeeper:x:65533:\nnogroup:x:65534:\n",
	} {
		if err := r.bytes(name, 0o644, body); err != nil {
			return err
		}
	}

	for _, name := range slices.Sorted(maps.Keys(p.programs)) {
		if err := r.add(p.programs[name], "usr/local/bin/"+name); err != nil {
			return err
		}
	}

	var alternatives []string
	for _, pkg := range p.packages {
		files, err := packageFiles(pkg)
		if err != nil {
			return err
		}
		for _, f := range files {
			name := imagePath(f)
			if name == "" || name == "etc/passwd" || name == "etc/group" {
				continue
			}
			if err := r.add(f, name); err != nil {
				return err
			}
			switch r.written[name] {
			case tar.TypeSymlink:
				// A link through the alternatives system (cc → /etc/alternatives/cc →
				// gcc) needs the alternative's link too; no package lists it.
				target, _ := os.Readlink(f)
				if !path.IsAbs(target) {
					target = path.Join(path.Dir(f), target)
				}
				if a, ok := strings.CutPrefix(path.Clean(target), "/etc/alternatives/"); ok && a != "" {
					alternatives = append(alternatives, a)
				}
			case tar.TypeDir:
				// Debian compiles Python modules when it installs them: the byte code is
				// in no package's list, and without it every run compiles them again
				// (the root is read-only and the tmpfs starts empty).
				if strings.HasPrefix(name, "usr/lib/python3") {
					if err := r.tree(filepath.Join(f, "__pycache__"), name+"/__pycache__"); err != nil {
						return err
					}
				}
			}
		}
	}
	for _, a := range alternatives {
		if err := r.add("/etc/alternatives/"+a, "etc/alternatives/"+a); err != nil {
			return err
		}
	}
	// Trust anchors for tools that check them (no network here, but a test may load them),
	// and the loader's cache of library paths; both are generated on install, in no list.
	for _, t := range []struct{ host, name string }{
		{"/etc/ssl/certs", "etc/ssl/certs"},
		{"/usr/share/ca-certificates", "usr/share/ca-certificates"},
		{"/etc/ld.so.cache", "etc/ld.so.cache"},
	} {
		if err := r.tree(t.host, t.name); err != nil {
			return err
		}
	}
	for _, req := range requiredFiles {
		_, ok := r.written[req.file]
		if !ok && slices.ContainsFunc(p.packages, func(pkg *dpkgPackage) bool { return pkg.name == req.with }) {
			return missingPackages([]string{req.from})
		}
	}

	if err := r.tree(p.goRoot, "usr/local/go"); err != nil {
		return err
	}
	if err := r.add(p.busybox, "usr/bin/busybox"); err != nil {
		return err
	}
	if r.written["usr/bin/busybox"] != tar.TypeReg {
		return fmt.Errorf("busybox %q: not a readable file: %w", p.busybox, errs.ErrFailedPrecondition)
	}
	for _, a := range applets {
		if a == "busybox" || strings.Contains(a, "/") {
			continue
		}
		// A real program a package brings wins over the applet of the same name.
		if _, ok := r.written["usr/sbin/"+a]; ok {
			continue
		}
		if err := r.symlink("usr/bin/"+a, "busybox"); err != nil {
			return err
		}
	}
	return r.tw.Close()
}

// errNoDpkg tells a machine that cannot build the image (no dpkg) from one that lacks
// packages.
func errNoDpkg(err error) bool {
	var ee *exec.Error
	return errors.As(err, &ee)
}

// busyboxApplets lists the applets the busybox binary has.
func busyboxApplets(ctx context.Context, busybox string) ([]string, error) {
	out, err := exec.CommandContext(ctx, busybox, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("busybox %q --list: %w: %w", busybox, err, errs.ErrFailedPrecondition)
	}
	var applets []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if a := strings.TrimSpace(sc.Text()); a != "" {
			applets = append(applets, a)
		}
	}
	return applets, nil
}
