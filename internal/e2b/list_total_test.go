package e2b

import (
	"net/http"
	"testing"
)

// X-Total-Running counts the running sandboxes matching a v2 list's
// filters before paging, and is left out of a list of paused ones only.
func TestListTotalRunning(t *testing.T) {
	e := newEnv(t)
	e.create(`{"templateID":"base","metadata":{"team":"red"}}`)
	e.create(`{"templateID":"base","metadata":{"team":"blue"}}`)
	for _, tt := range []struct{ query, want string }{
		{"?limit=1", "2"},
		{"?metadata=team%3Dred", "1"},
		{"?metadata=team%3Dgreen", "0"},
		{"?state=running,paused&limit=1", "2"},
		{"?state=paused", ""},
	} {
		req, err := http.NewRequest("GET", e.srv.URL+"/e2b/v2/sandboxes"+tt.query, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-API-KEY", testKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		got, present := resp.Header["X-Total-Running"]
		if resp.StatusCode != 200 || (tt.want == "") == present || (present && got[0] != tt.want) {
			t.Errorf("list%s: %d X-Total-Running %q, want %q", tt.query, resp.StatusCode, got, tt.want)
		}
	}
}
