// Command netprobe is what the egress tests run inside a Network sandbox: it reaches for
// hosts directly and through the proxy the environment names, and describes the network.
package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: netprobe get|pget|connect|dial|ifaces [arg]")
		os.Exit(2)
	}
	arg := ""
	if len(os.Args) > 2 {
		arg = os.Args[2]
	}
	switch os.Args[1] {
	case "get": // the proxy variables as Go reads them (a loopback URL is not proxied)
		get(http.ProxyFromEnvironment, arg)
	case "pget": // through $HTTP_PROXY whatever the URL
		u, err := url.Parse(os.Getenv("HTTP_PROXY"))
		if err != nil || u.Host == "" {
			fmt.Println("no HTTP_PROXY")
			os.Exit(2)
		}
		get(http.ProxyURL(u), arg)
	case "connect": // a raw CONNECT to $HTTPS_PROXY
		u, err := url.Parse(os.Getenv("HTTPS_PROXY"))
		if err != nil || u.Host == "" {
			fmt.Println("no HTTPS_PROXY")
			os.Exit(2)
		}
		c, err := net.DialTimeout("tcp", u.Host, 3*time.Second)
		if err != nil {
			fmt.Println("proxy dial failed:", err)
			os.Exit(2)
		}
		defer c.Close()
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", arg, arg)
		resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
		if err != nil {
			fmt.Println("connect failed:", err)
			os.Exit(2)
		}
		fmt.Println("status", resp.StatusCode)
		if resp.StatusCode != http.StatusOK {
			os.Exit(1)
		}
	case "dial":
		c, err := net.DialTimeout("tcp", arg, 3*time.Second)
		if err != nil {
			fmt.Println("dial failed:", err)
			os.Exit(1)
		}
		c.Close()
		fmt.Println("connected")
	case "ifaces":
		ifs, err := net.Interfaces()
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		for _, i := range ifs {
			addrs, _ := i.Addrs()
			fmt.Println(i.Name, addrs)
		}
	default:
		fmt.Fprintln(os.Stderr, "unknown mode", os.Args[1])
		os.Exit(2)
	}
}

func get(proxy func(*http.Request) (*url.URL, error), u string) {
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: proxy}}
	resp, err := c.Get(u)
	if err != nil {
		fmt.Println("get failed:", err)
		os.Exit(2)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	fmt.Printf("status %d %s\n", resp.StatusCode, b)
	if resp.StatusCode != http.StatusOK {
		os.Exit(1)
	}
}
