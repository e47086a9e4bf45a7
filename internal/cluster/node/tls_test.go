package node

import (
	"slices"
	"strings"
	"testing"
)

// A node's addresses are https:// (its listeners serve TLS only); their
// hosts are what its certificate names.
func TestHTTPSHosts(t *testing.T) {
	hosts, err := httpsHosts("https://10.0.0.11:7070", "", "https://node1.example:49983/")
	if err != nil || !slices.Equal(hosts, []string{"10.0.0.11", "node1.example"}) {
		t.Fatalf("%v %v", hosts, err)
	}
	for _, a := range []string{"http://10.0.0.11:7070", "10.0.0.11:7070", "https://"} {
		if _, err := httpsHosts(a); err == nil || !strings.Contains(err.Error(), "https://host:port") {
			t.Errorf("%q: %v", a, err)
		}
	}
}
