package deploy

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	buildDir  string
	corralBin string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// corral builds the corral binary once for the package's tests.
func corral(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if buildDir, buildErr = os.MkdirTemp("", "corral-deploy-test-"); buildErr != nil {
			return
		}
		corralBin = filepath.Join(buildDir, "corral")
		out, err := exec.Command("go", "build", "-o", corralBin, "corral/cmd/corral").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return corralBin
}

// flagSpec maps each flag of `corral serve` to its type ("bool" for a
// flag that takes no value).
type flagSpec map[string]string

// helpLine is a flag's line in cobra's help: "  -h, --name type   usage"
// or "      --name[=true|false]   usage" for a boolean.
var helpLine = regexp.MustCompile(`^\s+(?:-\w, )?--([a-z0-9-]+)(\[=true\|false\])?(?: (\S+))?\s{2,}`)

// serveFlags reads the flags from `corral serve --help` of the binary
// built from this tree.
func serveFlags(t *testing.T) flagSpec {
	t.Helper()
	out, err := exec.Command(corral(t), "serve", "--help").Output()
	if err != nil {
		t.Fatalf("corral serve --help: %v", err)
	}
	spec := flagSpec{}
	for _, line := range strings.Split(string(out), "\n") {
		m := helpLine.FindStringSubmatch(line)
		switch {
		case m == nil:
		case m[2] != "" || m[3] == "":
			spec[m[1]] = "bool"
		default:
			spec[m[1]] = m[3]
		}
	}
	for _, must := range []string{"node", "control", "cluster-db", "listen", "state-dir"} {
		if spec[must] == "" {
			t.Fatalf("corral serve --help names no --%s; its output:\n%s", must, out)
		}
	}
	return spec
}

// parseServe checks args (after the binary) against spec: "serve" first,
// then only known flags, each valued one with a value its type accepts.
// It returns the values by flag.
func parseServe(spec flagSpec, args []string) (map[string][]string, error) {
	if len(args) == 0 || args[0] != "serve" {
		return nil, fmt.Errorf("args %q: want serve first", args)
	}
	got := map[string][]string{}
	for i := 1; i < len(args); i++ {
		a := args[i]
		name, val, hasVal := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") || name == "" {
			return nil, fmt.Errorf("%q: not a flag (corral serve takes no arguments)", a)
		}
		typ, ok := spec[name]
		switch {
		case !ok:
			return nil, fmt.Errorf("--%s is not a flag of corral serve", name)
		case typ == "bool" && !hasVal:
			val = "true"
		case !hasVal:
			if i+1 == len(args) || strings.HasPrefix(args[i+1], "--") {
				return nil, fmt.Errorf("--%s needs a value (%s)", name, typ)
			}
			i++
			val = args[i]
		}
		if err := checkValue(typ, val); err != nil {
			return nil, fmt.Errorf("--%s %q: %v", name, val, err)
		}
		got[name] = append(got[name], val)
	}
	return got, nil
}

// checkValue checks val against the flag types the manifests use; other
// types are left to the binary.
func checkValue(typ, val string) error {
	var err error
	switch typ {
	case "bool":
		_, err = strconv.ParseBool(val)
	case "duration":
		_, err = time.ParseDuration(val)
	case "int":
		_, err = strconv.Atoi(val)
	case "uint16":
		_, err = strconv.ParseUint(val, 10, 16)
	}
	return err
}

// TestParseServeRejects: the flag check refuses what the binary would.
func TestParseServeRejects(t *testing.T) {
	spec := serveFlags(t)
	if _, err := parseServe(spec, []string{"serve", "--node", "--heartbeat=5s", "--listen", ":80"}); err != nil {
		t.Fatalf("good args refused: %v", err)
	}
	for _, args := range [][]string{
		{"serve", "--node-nam=x"},
		{"serve", "--listen"},
		{"serve", "--listen", "--node"},
		{"serve", "--heartbeat=5"},
		{"serve", "--node=maybe"},
		{"run", "--node"},
		{"serve", "extra"},
	} {
		if _, err := parseServe(spec, args); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
}
