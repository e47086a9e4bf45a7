package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"corral/internal/daemon"
)

func TestClusterFlags(t *testing.T) {
	ok := clusterFlags{heartbeat: 5 * time.Second, lostAfter: 30 * time.Second}
	dir := t.TempDir()
	dbFile, emptyFile, bigFile := filepath.Join(dir, "db"), filepath.Join(dir, "empty"), filepath.Join(dir, "big")
	for f, body := range map[string]string{dbFile: "postgres://u:secret@h/db\n", emptyFile: " \n", bigFile: strings.Repeat("x", maxDBFile+1)} {
		if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(clusterDBEnv, "")
	for _, c := range []struct {
		name string
		set  func(*clusterFlags)
		want string // "" : accepted
	}{
		{"single machine", func(*clusterFlags) {}, ""},
		{"node", func(c *clusterFlags) { c.node, c.db, c.labels = true, "postgres://x", []string{"zone=a", "gpu="} }, ""},
		{"control", func(c *clusterFlags) { c.control, c.db = true, "postgres://x" }, ""},
		{"both roles", func(c *clusterFlags) { c.node, c.control, c.db = true, true, "postgres://x" }, "two roles"},
		{"a role without a database", func(c *clusterFlags) { c.node = true }, "need --cluster-db"},
		{"a database without a role", func(c *clusterFlags) { c.db = "postgres://x" }, "needs --node or --control"},
		{"a label without =", func(c *clusterFlags) { c.node, c.db, c.labels = true, "postgres://x", []string{"zone"} }, "--node-label"},
		{"an empty label key", func(c *clusterFlags) { c.node, c.db, c.labels = true, "postgres://x", []string{"=a"} }, "--node-label"},
		{"no heartbeat", func(c *clusterFlags) { c.heartbeat = 0 }, "--heartbeat"},
		{"node from a file", func(c *clusterFlags) { c.node, c.dbFile = true, dbFile }, ""},
		{"control from the environment", func(c *clusterFlags) { c.control = true; t.Setenv(clusterDBEnv, "postgres://env") }, ""},
		{"the environment without a role", func(c *clusterFlags) { t.Setenv(clusterDBEnv, "postgres://env") }, ""},
		{"a URL and a file", func(c *clusterFlags) { c.node, c.db, c.dbFile = true, "postgres://x", dbFile }, "give one"},
		{"a file without a role", func(c *clusterFlags) { c.dbFile = dbFile }, "needs --node or --control"},
		{"a missing file", func(c *clusterFlags) { c.node, c.dbFile = true, filepath.Join(dir, "none") }, "--cluster-db-file"},
		{"an empty file", func(c *clusterFlags) { c.node, c.dbFile = true, emptyFile }, "is empty"},
		{"a file too big", func(c *clusterFlags) { c.node, c.dbFile = true, bigFile }, "over 64 KiB"},
		{"node TLS for a control", func(c *clusterFlags) { c.control, c.db, c.tlsCert, c.tlsKey = true, "postgres://x", "c", "k" }, "--node-tls-cert"},
		{"a CA without a role", func(c *clusterFlags) { c.clusterCA = "ca.pem" }, "--cluster-ca needs"},
		{"node TLS", func(c *clusterFlags) {
			c.node, c.db, c.tlsCert, c.tlsKey, c.clusterCA = true, "postgres://x", "c.pem", "k.pem", "ca.pem"
		}, ""},
	} {
		t.Setenv(clusterDBEnv, "")
		f := ok
		c.set(&f)
		var cfg daemon.Config
		err := f.apply(&cfg)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want an error naming %q", c.name, err, c.want)
		}
		if c.name == "node" && (cfg.Cluster.DB != "postgres://x" || cfg.Cluster.Labels["zone"] != "a" || cfg.Cluster.Labels["gpu"] != "") {
			t.Errorf("node: config %+v", cfg.Cluster)
		}
		if c.name == "node TLS" && (cfg.Cluster.TLS.CertFile != "c.pem" || cfg.Cluster.TLS.KeyFile != "k.pem" || cfg.Cluster.TLS.CAFile != "ca.pem") {
			t.Errorf("node TLS: config %+v", cfg.Cluster.TLS)
		}
		if c.name == "node from a file" && cfg.Cluster.DB != "postgres://u:secret@h/db" {
			t.Errorf("node from a file: database %q", cfg.Cluster.DB)
		}
		if c.name == "control from the environment" && f.db != "postgres://env" {
			t.Errorf("control from the environment: database %q", f.db)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: the error shows the file's content: %v", c.name, err)
		}
		if c.name == "control" && cfg.Cluster.DB != "" {
			t.Error("a control plane's flags made the daemon a node")
		}
	}
}

func TestNodeEnvdAddress(t *testing.T) {
	for _, c := range []struct {
		flag, api, listen string
		want              string // "error" : refused
	}{
		{"", "https://10.0.0.11:7070", "", ""},
		{"", "https://10.0.0.11:7070", "0.0.0.0:49983", "https://10.0.0.11:49983"},
		{"", "https://[fd00::1]:7070", ":49983", "https://[fd00::1]:49983"},
		{"https://envd.internal:9000", "https://10.0.0.11:7070", ":49983", "https://envd.internal:9000"},
		{"https://envd.internal:9000", "https://10.0.0.11:7070", "", "error"},
		{"envd.internal:9000", "https://10.0.0.11:7070", ":49983", "error"},
		{"", "10.0.0.11:7070", ":49983", "error"},
		{"", "https://10.0.0.11:7070", "49983", "error"},
	} {
		got, err := nodeEnvdAddress(c.flag, c.api, c.listen)
		if err != nil {
			got = "error"
		}
		if got != c.want {
			t.Errorf("nodeEnvdAddress(%q, %q, %q) = %q %v, want %q", c.flag, c.api, c.listen, got, err, c.want)
		}
	}
}
