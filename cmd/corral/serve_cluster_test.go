package main

import (
	"strings"
	"testing"
	"time"

	"corral/internal/daemon"
)

func TestClusterFlags(t *testing.T) {
	ok := clusterFlags{heartbeat: 5 * time.Second, lostAfter: 30 * time.Second}
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
	} {
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
		{"", "http://10.0.0.11:7070", "", ""},
		{"", "http://10.0.0.11:7070", "0.0.0.0:49983", "http://10.0.0.11:49983"},
		{"", "https://[fd00::1]:7070", ":49983", "https://[fd00::1]:49983"},
		{"http://envd.internal:9000", "http://10.0.0.11:7070", ":49983", "http://envd.internal:9000"},
		{"http://envd.internal:9000", "http://10.0.0.11:7070", "", "error"},
		{"envd.internal:9000", "http://10.0.0.11:7070", ":49983", "error"},
		{"", "10.0.0.11:7070", ":49983", "error"},
		{"", "http://10.0.0.11:7070", "49983", "error"},
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
