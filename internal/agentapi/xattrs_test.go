package agentapi

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"corral/internal/errdefs"
)

// A daemon refuses extended attributes to an agent older than protocol 4
// (which would ignore the query), before it sends anything; without them
// the same agent's write goes through.
func TestXattrsNeedProtocol4(t *testing.T) {
	writes := 0
	statQuery := "unset"
	routes := map[string]http.HandlerFunc{
		"/v3" + PathFiles: func(w http.ResponseWriter, r *http.Request) {
			writes++
			w.Write([]byte(`{"name":"f","path":"/f","type":"file"}`))
		},
		"/v3" + PathStat: func(w http.ResponseWriter, r *http.Request) {
			statQuery = r.URL.RawQuery
			w.Write([]byte(`{"name":"f","path":"/f","type":"file"}`))
		},
	}
	conn, _ := fakeAgent(t, agentMux([]int{1, 2, 3}, routes))
	c, err := NewClient(context.Background(), conn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	set := &XattrSet{Prefix: "user.e2b.", Values: map[string]string{"a": "b"}}
	_, err = c.WriteFileWith(context.Background(), "/f", strings.NewReader("x"), 0, "", WriteOptions{Xattrs: set})
	if !errors.Is(err, errdefs.ErrNotSupported) || writes != 0 {
		t.Errorf("xattrs to a protocol 3 agent: %v (sent %d); want not supported, nothing sent", err, writes)
	}
	if _, err := c.WriteFileWith(context.Background(), "/f", strings.NewReader("x"), 0, "", WriteOptions{InPlace: true}); err != nil || writes != 1 {
		t.Errorf("a plain write to a protocol 3 agent: %v (sent %d)", err, writes)
	}
	if _, err := c.StatXattrs(context.Background(), "/f", "", "user.e2b."); err != nil || strings.Contains(statQuery, QueryXattrs) {
		t.Errorf("a stat with attributes from a protocol 3 agent: %v (query %q); want a plain stat", err, statQuery)
	}
}
