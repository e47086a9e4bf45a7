package main

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestSecretHeaderHelp: --secret-header's help says what the proxy does:
// TLS only, port 443 and the default methods, never TRACE.
func TestSecretHeaderHelp(t *testing.T) {
	fs := pflag.NewFlagSet("create", pflag.ContinueOnError)
	var names, headers []string
	registerSecretFlags(fs, &names, &headers)
	help := fs.Lookup("secret-header").Usage
	for _, want := range []string{"TLS requests to HOST", "port 443", "GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS", "never TRACE", "never over plain HTTP"} {
		if !strings.Contains(help, want) {
			t.Errorf("--secret-header's help does not say %q:\n%s", want, help)
		}
	}
}
