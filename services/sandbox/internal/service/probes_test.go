package service_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	"github.com/thefold/thefold/pkg/grpctest"

	"github.com/thefold/thefold/services/sandbox/internal/backend/docker"
	"github.com/thefold/thefold/services/sandbox/internal/service"
)

// probeSecret is in this process's environment and in a host file outside every
// workspace: no sandboxed command may print it.
const probeSecret = "thefold-probe-secret-5b1e"

// The escape probes, through the sandbox service, for every isolating backend and every
// language's runtime: no network (loopback service ports, PostgreSQL, the engine socket,
// the internet), no host secrets (a key file, /etc/shadow, the service's environment via
// /proc), no writes outside the workspace, no other sandbox's files, and bounded fork
// bombs, memory hogs, endless loops and output floods.
func TestEscapeProbes(t *testing.T) {
	t.Setenv("THEFOLD_PROBE_SECRET", probeSecret)
	secretDir := t.TempDir()
	secretFile := filepath.Join(secretDir, "signing.key")
	if err := os.WriteFile(secretFile, []byte(probeSecret), 0o644); err != nil {
		t.Fatal(err)
	}
	// A listener standing in for the mesh's service ports.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// A cleanup, not a defer: the parallel subtests run after this function returns.
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	servicePort := ln.Addr().(*net.TCPAddr).Port

	for _, kind := range []sandboxv1.SandboxBackend{dockerKind, bwrapKind} {
		t.Run(strings.ToLower(strings.TrimPrefix(kind.String(), "SANDBOX_BACKEND_")), func(t *testing.T) {
			t.Parallel()
			e := startPolicy(t, service.Config{Images: docker.DefaultImages()}, kind)
			limits := &sandboxv1.ResourceLimits{MemoryBytes: 128 << 20, Pids: 64}
			other, err := e.client.CreateSandbox(e.long(), &sandboxv1.CreateSandboxRequest{Language: "python"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.client.WriteFile(e.long(), &sandboxv1.WriteFileRequest{SandboxId: other.Sandbox.Id, Path: "private.txt", Content: []byte(probeSecret)}); err != nil {
				t.Fatal(err)
			}
			others, _ := filepath.Glob(filepath.Join(e.dir, "*", "ws", "private.txt"))
			if len(others) != 1 {
				t.Fatalf("the other sandbox's file on the host: %v", others)
			}
			otherFile := others[0]
			for _, lang := range []string{"go", "python", "typescript"} {
				t.Run(lang, func(t *testing.T) {
					t.Parallel()
					// Default limits: the Go probe compiles, which 128 MiB does not hold.
					resp, err := e.client.CreateSandbox(e.long(), &sandboxv1.CreateSandboxRequest{Language: lang})
					if err != nil {
						t.Fatal(err)
					}
					if resp.Sandbox.Backend != kind {
						t.Fatalf("asked for %s's default, got %s (warnings %q)", kind, resp.Sandbox.Backend, resp.Warnings)
					}
					id := resp.Sandbox.Id
					pe := &probeEnv{t: t, e: e, id: id}
					targets := []string{fmt.Sprintf("127.0.0.1:%d", servicePort), "127.0.0.1:5432", e.addr(), "1.1.1.1:53", "[::1]:5432"}

					// Network, in the language's own runtime.
					switch lang {
					case "python":
						pe.write("probe.py", pythonNetProbe(targets))
						pe.noneOf(pe.run("python3", "probe.py"), "CONNECTED")
					case "typescript":
						pe.write("probe.js", nodeNetProbe(targets))
						pe.noneOf(pe.run("node", "probe.js"), "CONNECTED")
					case "go":
						pe.write("go.mod", "module probe\n\ngo 1.22\n")
						pe.write("main.go", goNetProbe(targets))
						out := pe.run("go", "run", ".")
						pe.noneOf(out, "CONNECTED")
						if !strings.Contains(out, "blocked") {
							t.Fatalf("the Go probe did not run: %s", out)
						}
					}
					// Host files and other sandboxes.
					for _, argv := range [][]string{
						{"cat", secretFile},
						{"cat", "/etc/shadow"},
						{"cat", "/proc/1/environ"},
						{"cat", "/proc/self/environ"},
						{"ls", "-la", "/var/run/docker.sock", "/run/docker.sock"},
						{"cat", otherFile},
						{"find", "/", "-name", "private.txt", "-not", "-path", "/proc/*"},
					} {
						pe.noneOf(pe.run(argv...), probeSecret, "docker.sock\n")
					}
					// Writes outside the workspace land nowhere on the host.
					for _, p := range []string{filepath.Join(secretDir, "planted"), "/tmp/../planted-" + lang} {
						pe.run("touch", p)
						if _, err := os.Stat(p); err == nil {
							t.Fatalf("a sandboxed touch created %s on the host", p)
						}
					}
					pe.run("cp", "/etc/hostname", "/etc/planted")
					if _, err := os.Stat("/etc/planted"); err == nil {
						t.Fatal("a sandboxed cp wrote /etc/planted on the host")
					}
					// Paths that leave the workspace are refused before anything runs.
					_, err = e.client.ReadFile(e.long(), &sandboxv1.ReadFileRequest{SandboxId: id, Path: "../../" + filepath.Base(filepath.Dir(filepath.Dir(otherFile))) + "/ws/private.txt"})
					grpctest.WantCode(t, err, codes.InvalidArgument)
					// A symlink out of the workspace, as a command could leave one.
					pe.write("me.txt", id)
					if err := os.Symlink(secretFile, filepath.Join(e.workspaceOf(t, id), "link")); err != nil {
						t.Fatal(err)
					}
					if r, err := e.client.ReadFile(e.long(), &sandboxv1.ReadFileRequest{SandboxId: id, Path: "link"}); err == nil && strings.Contains(string(r.Content), probeSecret) {
						t.Fatal("ReadFile followed a symlink out of the workspace")
					}
				})
			}
			// Resource abuse, once per backend (python is in every image).
			resp, err := e.client.CreateSandbox(e.long(), &sandboxv1.CreateSandboxRequest{Language: "python", Limits: limits})
			if err != nil {
				t.Fatal(err)
			}
			pe := &probeEnv{t: t, e: e, id: resp.Sandbox.Id}
			pe.write("fork.py", "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n")
			if r := pe.result("python3", "fork.py"); !r.res.TimedOut && r.res.ExitCode == 0 {
				t.Fatalf("fork bomb: %+v", r.res)
			}
			pe.write("hog.py", "b = []\nwhile True:\n    b.append(bytearray(16 << 20))\n")
			if r := pe.result("python3", "hog.py"); r.res.ExitCode == 0 {
				t.Fatalf("memory hog was not stopped: %+v", r.res)
			}
			pe.write("flood.py", "import sys\nfor _ in range(200000):\n    sys.stdout.write('x' * 100 + '\\n')\n")
			if r := pe.result("python3", "flood.py"); !r.res.OutputTruncated || len(r.stdout)+len(r.stderr) > 2<<20 {
				t.Fatalf("output flood: truncated %v, %d bytes kept", r.res.OutputTruncated, len(r.stdout)+len(r.stderr))
			}
			pe.write("loop.py", "while True:\n    pass\n")
			start := time.Now()
			if r := pe.result("python3", "loop.py"); !r.res.TimedOut {
				t.Fatalf("endless loop: %+v", r.res)
			}
			if d := time.Since(start); d > time.Minute {
				t.Fatalf("the endless loop ran %s past its 3s timeout", d)
			}
			// The sandbox still works afterwards.
			pe.noneOf(pe.run("python3", "-c", "print('still here')"), "Traceback")
		})
	}
}

type probeEnv struct {
	t  *testing.T
	e  *policyEnv
	id string
}

func (p *probeEnv) write(path, content string) {
	p.t.Helper()
	if _, err := p.e.client.WriteFile(p.e.long(), &sandboxv1.WriteFileRequest{SandboxId: p.id, Path: path, Content: []byte(content)}); err != nil {
		p.t.Fatalf("WriteFile %s: %v", path, err)
	}
}

func (p *probeEnv) result(argv ...string) *result {
	p.t.Helper()
	r, err := runIn(p.e.long(), p.e.client, &sandboxv1.RunCommandRequest{SandboxId: p.id, Command: argv, Timeout: durationpb.New(3 * time.Second)})
	if err != nil {
		p.t.Fatalf("%q: %v", argv, err)
	}
	return r
}

// run runs argv and returns its output, whatever its exit code.
func (p *probeEnv) run(argv ...string) string {
	p.t.Helper()
	r, err := runIn(p.e.long(), p.e.client, &sandboxv1.RunCommandRequest{SandboxId: p.id, Command: argv, Timeout: durationpb.New(2 * time.Minute)})
	if err != nil {
		p.t.Fatalf("%q: %v", argv, err)
	}
	return r.stdout + r.stderr
}

func (p *probeEnv) noneOf(out string, bad ...string) {
	p.t.Helper()
	for _, b := range bad {
		if strings.Contains(out, b) {
			p.t.Fatalf("a probe got through (%q in its output):\n%s", b, out)
		}
	}
}

func (e *policyEnv) addr() string { return e.target }

// workspaceOf finds the host directory of sandbox id (whose me.txt holds its id).
func (e *policyEnv) workspaceOf(t *testing.T, id string) string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(e.dir, "*", "ws", "me.txt"))
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil && string(b) == id {
			return filepath.Dir(f)
		}
	}
	t.Fatalf("no workspace on the host holds sandbox %s", id)
	return ""
}

// runIn runs req and collects its stream; a stream that ends without a result is an error.
func runIn(ctx context.Context, c sandboxv1.SandboxServiceClient, req *sandboxv1.RunCommandRequest) (*result, error) {
	stream, err := c.RunCommand(ctx, req)
	if err != nil {
		return nil, err
	}
	out := &result{}
	for {
		m, err := stream.Recv()
		if err == io.EOF {
			if out.res == nil {
				return nil, errors.New("the stream ended without a result")
			}
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		switch ev := m.Event.(type) {
		case *sandboxv1.RunCommandResponse_Output:
			if ev.Output.Stream == sandboxv1.OutputStream_OUTPUT_STREAM_STDERR {
				out.stderr += string(ev.Output.Data)
			} else {
				out.stdout += string(ev.Output.Data)
			}
		case *sandboxv1.RunCommandResponse_Result:
			out.res = ev.Result
		}
	}
}

func pythonNetProbe(targets []string) string {
	var b strings.Builder
	b.WriteString("import socket\n")
	b.WriteString("def probe(host, port):\n    try:\n        s = socket.create_connection((host, port), timeout=2)\n        print('CONNECTED', host, port)\n        s.close()\n    except Exception as e:\n        print('blocked', host, port, e)\n")
	for _, t := range targets {
		host, port, _ := net.SplitHostPort(t)
		fmt.Fprintf(&b, "probe(%q, %s)\n", host, port)
	}
	b.WriteString("for p in ['/var/run/docker.sock', '/run/docker.sock']:\n    try:\n        s = socket.socket(socket.AF_UNIX)\n        s.connect(p)\n        print('CONNECTED', p)\n    except Exception as e:\n        print('blocked', p, e)\n")
	return b.String()
}

func nodeNetProbe(targets []string) string {
	var b strings.Builder
	b.WriteString("const net = require('net');\nconst probe = (o) => new Promise((done) => {\n  const s = net.connect(o, () => { console.log('CONNECTED', JSON.stringify(o)); s.destroy(); done(); });\n  s.setTimeout(2000, () => { console.log('blocked', JSON.stringify(o), 'timeout'); s.destroy(); done(); });\n  s.on('error', (e) => { console.log('blocked', JSON.stringify(o), e.code); done(); });\n});\n(async () => {\n")
	for _, t := range targets {
		host, port, _ := net.SplitHostPort(t)
		fmt.Fprintf(&b, "  await probe({host: %q, port: %s});\n", host, port)
	}
	b.WriteString("  await probe({path: '/var/run/docker.sock'});\n  await probe({path: '/run/docker.sock'});\n})();\n")
	return b.String()
}

func goNetProbe(targets []string) string {
	var b strings.Builder
	b.WriteString("package main\n\nimport (\n\t\"fmt\"\n\t\"net\"\n\t\"time\"\n)\n\nfunc main() {\n")
	b.WriteString("\tfor _, t := range [][2]string{\n")
	for _, t := range targets {
		fmt.Fprintf(&b, "\t\t{\"tcp\", %q},\n", t)
	}
	b.WriteString("\t\t{\"unix\", \"/var/run/docker.sock\"},\n\t\t{\"unix\", \"/run/docker.sock\"},\n\t} {\n")
	b.WriteString("\t\tc, err := net.DialTimeout(t[0], t[1], 2*time.Second)\n\t\tif err != nil {\n\t\t\tfmt.Println(\"blocked\", t[1], err)\n\t\t\tcontinue\n\t\t}\n\t\tfmt.Println(\"CONNECTED\", t[1])\n\t\tc.Close()\n\t}\n}\n")
	return b.String()
}
