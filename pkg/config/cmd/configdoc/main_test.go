package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestScan(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "services", "widget")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src := "package widget\n\ntype Config struct {\n" +
		"\t// Size is how big a widget is | in cm.\n\tSize int `env:\"THEFOLD_WIDGET_SIZE, default=3\"`\n" +
		"\t// Proxies are trusted, and Hosts too.\n\tProxies []string `env:\"THEFOLD_WIDGET_PROXIES, default=127.0.0.0/8,::1\"`\n" +
		"\tHosts []string `env:\"THEFOLD_WIDGET_HOSTS\"`\n" +
		"\tToken string `env:\"THEFOLD_WIDGET_TOKEN, required\" secret:\"true\"` // The token.\n" +
		"\tOther string `json:\"other\"`\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "config.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Scan(root)
	if err != nil {
		t.Fatal(err)
	}
	w := got["widget"]
	if len(w) != 4 {
		t.Fatalf("settings: %+v", w)
	}
	var b strings.Builder
	if err := Write(&b, got); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| `THEFOLD_WIDGET_SIZE` | `3` | Size is how big a widget is \\| in cm. |",
		"| `THEFOLD_WIDGET_PROXIES` | `127.0.0.0/8,::1` | Proxies are trusted, and Hosts too. |",
		"| `THEFOLD_WIDGET_HOSTS` | — | Proxies are trusted, and Hosts too. |",
		"| `THEFOLD_WIDGET_TOKEN` | required | The token. Secret: masked in logs. |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("missing %q in:\n%s", want, b.String())
		}
	}
}

func TestScanRefusesUndocumented(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "pkg", "x")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src := "package x\n\ntype C struct {\n\tA int `env:\"THEFOLD_X_A\"`\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "c.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Scan(root); err == nil || !strings.Contains(err.Error(), "THEFOLD_X_A") {
		t.Fatalf("an undocumented setting: %v", err)
	}
}
