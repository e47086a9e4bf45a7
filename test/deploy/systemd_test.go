package deploy

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// systemdDir is deploy/systemd, from this package's directory.
const systemdDir = "../../deploy/systemd"

// installedBinary is where the units expect corral.
const installedBinary = "/usr/local/bin/corral"

// unit is the directives of a unit file, continuation lines joined.
type unit map[string][]string

func readUnit(t *testing.T, path string) unit {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u := unit{}
	var line string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		s := strings.TrimSpace(sc.Text())
		if line == "" && (s == "" || strings.HasPrefix(s, "#") || strings.HasPrefix(s, "[")) {
			continue
		}
		if cont, ok := strings.CutSuffix(s, `\`); ok {
			line += cont + " "
			continue
		}
		line += s
		k, v, _ := strings.Cut(line, "=")
		u[k] = append(u[k], v)
		line = ""
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return u
}

// readEnvExample reads cluster.env.example's KEY=VALUE lines.
func readEnvExample(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(systemdDir, "cluster.env.example"))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok && !strings.HasPrefix(l, "#") {
			env[k] = v
		}
	}
	return env
}

var unitVar = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

func units(t *testing.T) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(systemdDir, "*.service"))
	if err != nil || len(paths) < 3 {
		t.Fatalf("units in %s: %v %v", systemdDir, paths, err)
	}
	return paths
}

// TestSystemdUnitsArgs: each unit's ExecStart runs corral serve with real
// flags, the variables it uses are in cluster.env.example, and its
// credentials are loaded.
func TestSystemdUnitsArgs(t *testing.T) {
	spec := serveFlags(t)
	env := readEnvExample(t)
	for _, p := range units(t) {
		u := readUnit(t, p)
		name := filepath.Base(p)
		if len(u["ExecStart"]) != 1 {
			t.Errorf("%s: want one ExecStart, have %d", name, len(u["ExecStart"]))
			continue
		}
		cmdline := u["ExecStart"][0]
		if strings.ContainsAny(cmdline, `"'`) {
			t.Errorf("%s: quoting in ExecStart: the check splits on spaces", name)
		}
		creds := map[string]bool{}
		for _, lc := range u["LoadCredential"] {
			id, _, _ := strings.Cut(lc, ":")
			creds[id] = true
		}
		fields := strings.Fields(cmdline)
		for i, f := range fields {
			fields[i] = unitVar.ReplaceAllStringFunc(f, func(ref string) string {
				v := unitVar.FindStringSubmatch(ref)[1]
				if _, ok := env[v]; !ok || len(u["EnvironmentFile"]) == 0 {
					t.Errorf("%s: ExecStart uses ${%s}, which no EnvironmentFile (cluster.env.example) sets", name, v)
				}
				return env[v]
			})
			if cred, ok := strings.CutPrefix(f, "%d/"); ok && !creds[cred] {
				t.Errorf("%s: ExecStart uses credential %s, which no LoadCredential loads", name, cred)
			}
		}
		if fields[0] != installedBinary {
			t.Errorf("%s: ExecStart runs %s, want %s", name, fields[0], installedBinary)
		}
		if _, err := parseServe(spec, fields[1:]); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestSystemdVerify: systemd-analyze verify finds nothing to say about the
// units (corral's path swapped for the binary built here, which it checks
// is executable); an unknown directive, which it only warns about, is
// shown to be caught.
func TestSystemdVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed: the units are not verified")
	}
	bin := corral(t)
	dir := t.TempDir()
	var paths []string
	for _, p := range units(t) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, filepath.Base(p))
		if err := os.WriteFile(dst, []byte(strings.ReplaceAll(string(b), installedBinary, bin)), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, dst)
	}
	verify := func(paths ...string) string {
		out, err := exec.Command(analyze, append([]string{"verify", "--man=no"}, paths...)...).CombinedOutput()
		if err != nil {
			return string(out) + err.Error()
		}
		return string(out)
	}
	if out := verify(paths...); out != "" {
		t.Errorf("systemd-analyze verify:\n%s", out)
	}
	b, _ := os.ReadFile(paths[0])
	bad := filepath.Join(dir, "bad.service")
	if err := os.WriteFile(bad, []byte(strings.Replace(string(b), "Restart=", "Restrat=", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := verify(bad); !strings.Contains(out, "Restrat") {
		t.Errorf("a misspelt directive passed systemd-analyze verify (%q)", out)
	}
}
