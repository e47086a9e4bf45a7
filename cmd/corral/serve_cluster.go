package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"corral/internal/cluster/control"
	"corral/internal/daemon"
)

// clusterFlags are `corral serve`'s cluster roles: --node (a daemon that
// joins a cluster) or --control (a stateless control plane); neither is
// the single machine, which needs no database.
type clusterFlags struct {
	node, control bool
	db, dbFile    string
	joinTokenFile string
	name, address string
	envdAddress   string
	labels        []string
	heartbeat     time.Duration
	lostAfter     time.Duration
	tokenFile     string
	tlsCert       string
	tlsKey        string
	clusterCA     string
}

func addClusterFlags(f *pflag.FlagSet, c *clusterFlags) {
	f.BoolVar(&c.node, "node", false, "run as a node of a cluster (needs --cluster-db, --join-token-file, --node-name, --node-address)")
	f.BoolVar(&c.control, "control", false, "run as a stateless control plane of a cluster (needs --cluster-db, --join-token-file, --token-file); serves the API on --listen")
	f.StringVar(&c.db, "cluster-db", "", "the cluster's PostgreSQL, as a URL (postgres://user@host/db) or key=value string (on the command line: keep its password in PGPASSWORD, or use --cluster-db-file or $"+clusterDBEnv+")")
	f.StringVar(&c.dbFile, "cluster-db-file", "", "a file holding --cluster-db's URL, password included if wanted (a Kubernetes Secret's file, a systemd credential)")
	f.StringVar(&c.joinTokenFile, "join-token-file", "", "a file holding the cluster's join token (at least 16 bytes), the same for nodes and control planes")
	f.StringVar(&c.name, "node-name", "", "this node's name in the cluster")
	f.StringVar(&c.address, "node-address", "", "the base URL control planes reach this node's API at (https://host:port: its listener serves TLS)")
	f.StringVar(&c.envdAddress, "node-envd-address", "", "the base URL control planes reach this node's envd face at (https://host:port); default: --node-address's host with --envd-listen's port")
	f.StringArrayVar(&c.labels, "node-label", nil, "a label of this node, key=value (repeatable); creates select nodes by labels with node_selector")
	f.DurationVar(&c.heartbeat, "heartbeat", 5*time.Second, "time between a node's heartbeats")
	f.DurationVar(&c.lostAfter, "node-lost-after", 30*time.Second, "a control plane marks a node silent for longer than this lost, and its sandboxes with it")
	f.StringVar(&c.tokenFile, "token-file", "", "a control plane's API token, the one its callers present (at least 16 bytes)")
	f.StringVar(&c.tlsCert, "node-tls-cert", "", "a node's TLS certificate (PEM; with --node-tls-key), instead of the key and self-signed certificate it makes in its state dir")
	f.StringVar(&c.tlsKey, "node-tls-key", "", "the private key of --node-tls-cert (PEM)")
	f.StringVar(&c.clusterCA, "cluster-ca", "", "CA certificates (PEM) that nodes' certificates must chain to, naming the node's host; without it, nodes are checked against the fingerprint they registered")
}

// clusterDBEnv is the environment variable a node or control plane reads
// the database's URL from when neither --cluster-db nor --cluster-db-file
// is given (a password in the environment stays off the command line).
const clusterDBEnv = "CORRAL_CLUSTER_DB"

// maxDBFile bounds --cluster-db-file (a URL, or a key=value string).
const maxDBFile = 64 << 10

// readDB sets c.db from --cluster-db-file, or else, for a node or a
// control plane, from $CORRAL_CLUSTER_DB. The file's content is never
// put in an error.
func (c *clusterFlags) readDB() error {
	if c.dbFile == "" {
		if c.db == "" && (c.node || c.control) {
			c.db = strings.TrimSpace(os.Getenv(clusterDBEnv))
		}
		return nil
	}
	if c.db != "" {
		return fmt.Errorf("--cluster-db and --cluster-db-file: give one")
	}
	f, err := os.Open(c.dbFile)
	if err != nil {
		return fmt.Errorf("--cluster-db-file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxDBFile+1))
	switch {
	case err != nil:
		return fmt.Errorf("--cluster-db-file %s: %w", c.dbFile, err)
	case len(b) > maxDBFile:
		return fmt.Errorf("--cluster-db-file %s: over %d KiB, not a database URL", c.dbFile, maxDBFile>>10)
	}
	if c.db = strings.TrimSpace(string(b)); c.db == "" {
		return fmt.Errorf("--cluster-db-file %s is empty", c.dbFile)
	}
	return nil
}

// apply checks the roles' flags and puts a node's into cfg.
func (c *clusterFlags) apply(cfg *daemon.Config) error {
	if err := c.readDB(); err != nil {
		return err
	}
	switch {
	case c.node && c.control:
		return fmt.Errorf("--node and --control are two roles: run two processes")
	case (c.node || c.control) && c.db == "":
		return fmt.Errorf("--node and --control need --cluster-db, --cluster-db-file or $%s", clusterDBEnv)
	case !c.node && !c.control && c.db != "":
		return fmt.Errorf("--cluster-db (or --cluster-db-file) needs --node or --control")
	case !c.node && (c.tlsCert != "" || c.tlsKey != ""):
		return fmt.Errorf("--node-tls-cert and --node-tls-key are a node's (--node)")
	case !c.node && !c.control && c.clusterCA != "":
		return fmt.Errorf("--cluster-ca needs --node or --control")
	case c.heartbeat <= 0 || c.lostAfter <= 0:
		return fmt.Errorf("--heartbeat %s and --node-lost-after %s: both must be positive (the bound several heartbeats long)", c.heartbeat, c.lostAfter)
	}
	if !c.node {
		return nil
	}
	labels := map[string]string{}
	for _, l := range c.labels {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" || len(k) > 63 || len(v) > 63 {
			return fmt.Errorf("--node-label %q: want key=value, a key of 1 to 63 bytes and a value of at most 63", l)
		}
		labels[k] = v
	}
	cfg.Cluster.DB, cfg.Cluster.Name, cfg.Cluster.Address = c.db, c.name, c.address
	envdAddr, err := nodeEnvdAddress(c.envdAddress, c.address, cfg.EnvdListen)
	if err != nil {
		return err
	}
	cfg.Cluster.EnvdAddress = envdAddr
	cfg.Cluster.JoinTokenFile, cfg.Cluster.Labels, cfg.Cluster.Heartbeat = c.joinTokenFile, labels, c.heartbeat
	cfg.Cluster.TLS.CertFile, cfg.Cluster.TLS.KeyFile, cfg.Cluster.TLS.CAFile = c.tlsCert, c.tlsKey, c.clusterCA
	return nil
}

// nodeEnvdAddress is the envd face's URL a node registers: the flag's,
// or else --node-address's host with --envd-listen's port ("" when the
// face is off).
func nodeEnvdAddress(flag, apiAddr, envdListen string) (string, error) {
	if envdListen == "" {
		if flag != "" {
			return "", fmt.Errorf("--node-envd-address needs the envd face on (--envd-listen)")
		}
		return "", nil
	}
	if flag != "" {
		if u, err := url.Parse(flag); err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
			return "", fmt.Errorf("--node-envd-address %q: want http(s)://host:port", flag)
		}
		return flag, nil
	}
	u, err := url.Parse(apiAddr)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("--node-address %q: want http(s)://host:port", apiAddr)
	}
	_, port, err := net.SplitHostPort(envdListen)
	if err != nil {
		return "", fmt.Errorf("--envd-listen %q: %w", envdListen, err)
	}
	return u.Scheme + "://" + net.JoinHostPort(u.Hostname(), port), nil
}

// runControl runs a control plane; envdListen ("": none) serves its
// envd face, which passes each request on to the sandbox's node.
func runControl(ctx context.Context, c clusterFlags, listen, envdListen, e2bRuntime, readyFile string, mcpMaxTimeout time.Duration, log *slog.Logger) error {
	return control.Run(ctx, control.Config{Listen: listen, EnvdListen: envdListen, E2BRuntime: e2bRuntime, DB: c.db, TokenFile: c.tokenFile,
		JoinTokenFile: c.joinTokenFile, LostAfter: c.lostAfter, MCPMaxTimeout: mcpMaxTimeout, ClusterCA: c.clusterCA, Version: version, Log: log,
		ReadyFile: readyFile})
}
