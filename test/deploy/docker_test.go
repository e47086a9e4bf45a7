package deploy

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestDockerfile: the Dockerfile has the two targets the manifests'
// images name, and builds with the Go release go.mod asks for.
func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile("../../deploy/docker/Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(b)
	for _, target := range []string{"control", "node"} {
		if !regexp.MustCompile(`(?m)^FROM \S+ AS ` + target + `$`).MatchString(df) {
			t.Errorf("the Dockerfile has no target %s (image corral-%s)", target, target)
		}
	}
	gomod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(gomod)
	if m == nil {
		t.Fatal("go.mod has no go directive")
	}
	if release := string(m[1]); !strings.Contains(df, "FROM golang:"+release+"-") {
		t.Errorf("the Dockerfile's build stage is not golang:%s (go.mod's go release)", release)
	}
	if !strings.Contains(df, "CGO_ENABLED=0 go build") {
		t.Error("the Dockerfile does not build a static binary (CGO_ENABLED=0)")
	}
}
