package deploytest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// compose_test.go loads the compose file with compose-go, whose own
// dependencies (go.yaml.in/yaml/v4, go-viper/mapstructure, ...) go.sum
// does not list yet, so it builds only with -tags composego. This test
// reports that it is off, and fails once go.sum has those dependencies
// while the build constraint is still there, so the compose checks cannot
// stay off by accident.
func TestComposeChecksAreOn(t *testing.T) {
	sum, err := os.ReadFile(filepath.Join(root(t), "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("compose_test.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(src), "//go:build composego") {
		return // always built: nothing to guard
	}
	ready := true
	for _, mod := range []string{"github.com/go-viper/mapstructure/v2 v2.4.0 h1:", "go.yaml.in/yaml/v4 v4.0.0-rc.4 h1:",
		"github.com/santhosh-tekuri/jsonschema/v6 v6.0.1 h1:", "github.com/mattn/go-shellwords v1.0.12 h1:",
		"github.com/xhit/go-str2duration/v2 v2.1.0 h1:", "golang.org/x/text v0.43.0 h1:"} {
		ready = ready && strings.Contains(string(sum), mod)
	}
	if ready {
		t.Fatal("go.sum now lists compose-go's dependencies: delete the //go:build composego line of deploy/deploytest/compose_test.go")
	}
	t.Skip("docker-compose.yml checks are off: go.sum lacks compose-go's dependencies; run them with -tags composego (see compose_test.go)")
}
