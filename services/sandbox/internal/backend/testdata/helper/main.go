// Command helper is what the backend tests run inside sandboxes: small deterministic
// misbehaviours (dial out, hog memory, flood output, fork until refused, ignore SIGTERM).
package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: helper mode [args]")
		os.Exit(2)
	}
	arg := func(i int) string {
		if len(os.Args) > i {
			return os.Args[i]
		}
		return ""
	}
	switch os.Args[1] {
	case "dial":
		c, err := net.DialTimeout("tcp", arg(2), 3*time.Second)
		if err != nil {
			fmt.Println("dial failed:", err)
			os.Exit(1)
		}
		c.Close()
		fmt.Println("connected")
	case "hog":
		n, _ := strconv.Atoi(arg(2))
		b := make([]byte, n)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1 // touch every page so it is really resident
		}
		fmt.Println("survived", len(b))
	case "flood":
		n, _ := strconv.Atoi(arg(2))
		chunk := []byte(strings.Repeat("x", 1023) + "\n")
		for n > 0 {
			k := min(n, len(chunk))
			os.Stdout.Write(chunk[:k])
			n -= k
		}
	case "stream":
		n, _ := strconv.Atoi(arg(2))
		for i := 0; i < n; i++ {
			fmt.Fprintf(os.Stdout, "out %d\n", i)
			fmt.Fprintf(os.Stderr, "err %d\n", i)
		}
	case "env":
		for _, kv := range os.Environ() {
			fmt.Println(kv)
		}
	case "loop":
		for {
		}
	case "stubborn":
		// Ignores SIGTERM, starts a grandchild that does too, writes both pids, waits forever.
		signal.Ignore(syscall.SIGTERM)
		c := exec.Command(os.Args[0], "sleeper")
		if err := c.Start(); err != nil {
			fmt.Println("start:", err)
			os.Exit(1)
		}
		os.WriteFile(arg(2), []byte(fmt.Sprintf("%d %d", os.Getpid(), c.Process.Pid)), 0o644)
		fmt.Println("ready")
		sleepForever()
	case "sleeper":
		signal.Ignore(syscall.SIGTERM)
		sleepForever()
	case "forkbomb":
		// Starts children that never exit until the kernel refuses one.
		for i := 0; ; i++ {
			c := exec.Command(os.Args[0], "sleeper")
			if err := c.Start(); err != nil {
				fmt.Printf("fork refused after %d children: %v\n", i, err)
				os.Exit(3)
			}
			if i > 100000 {
				fmt.Println("never refused")
				return
			}
		}
	default:
		fmt.Fprintln(os.Stderr, "unknown mode", os.Args[1])
		os.Exit(2)
	}
}

// sleepForever blocks without tripping the runtime's deadlock detector (as select{} would).
func sleepForever() {
	for {
		time.Sleep(time.Hour)
	}
}
