package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"corral/internal/manager"
)

// TestDecisionFlood: one sandbox floods its resolver with made-up names
// for 8 s (thousands of decisions) and makes one real connection, denied,
// in the middle. Its events and audit entries stay within the documented
// bound (manager.DecisionBurst detailed, then DecisionRate a second, and
// one fold per DecisionWindow); every answered query is either a detailed
// event or counted in a fold; the real connection is findable; and the
// event log, past 1,000 events, is all there page after page.
func TestDecisionFlood(t *testing.T) {
	w := newWorld(t)
	d := startDaemon(t, "--dns-upstream", w.dnsAddr)
	id := d.create("--expose-public", "8000")
	d.mustCLI("fs", "put", id, "testdata/dns_flood.py", "/srv/flood.py")
	const secs = 8
	start := time.Now()
	out := d.mustCLI("exec", id, "--", "python3", "/srv/flood.py", strconv.Itoa(secs), internalAddr)
	var res struct {
		Sent   int            `json:"sent"`
		Rcodes map[string]int `json:"rcodes"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("the flood's report %q: %v", out, err)
	}
	answered := res.Rcodes["0"] + res.Rcodes["3"] + res.Rcodes["2"]
	t.Logf("flood: %d queries, answers by rcode %v", res.Sent, res.Rcodes)
	if answered < 2*manager.DecisionBurst {
		t.Fatalf("only %d queries answered: not a flood", answered)
	}
	// The last window's fold is written once it ends.
	time.Sleep(manager.DecisionWindow + 2*time.Second)
	elapsed := time.Since(start)

	evs, err := d.client.Events(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	detailedDNS, folded, folds, evBytes := 0, 0, 0, 0
	realSeen := ""
	for _, e := range evs {
		b, _ := json.Marshal(e)
		evBytes += len(b)
		switch {
		case strings.HasPrefix(e.Kind, "egress_") && e.Fields["proto"] == "dns":
			detailedDNS++
		case e.Kind == "egress_denied" && e.Fields["dst"] == internalAddr:
			realSeen = e.Message
		case e.Kind == "limit_reached" && e.Fields["resource"] == "network_decisions":
			n, _ := strconv.Atoi(e.Fields["folded"])
			folded += n
			folds++
			if strings.Contains(e.Fields["destinations"], internalAddr+":80") {
				realSeen = e.Message
			}
		}
	}
	t.Logf("events: %d (%d bytes): %d detailed DNS decisions, %d folded in %d folds", len(evs), evBytes, detailedDNS, folded, folds)
	if folds == 0 || folded == 0 {
		t.Fatalf("no fold: the flood was not bounded")
	}
	if got := detailedDNS + folded; got < answered || got > res.Sent+10 {
		t.Errorf("detailed %d + folded %d = %d, want between the %d answered and the %d sent: decisions lost or invented", detailedDNS, folded, got, answered, res.Sent)
	}
	if realSeen == "" {
		t.Errorf("the real connection to %s:80 is neither an event nor in a fold", internalAddr)
	}
	// The bound: DecisionBurst, DecisionRate a second and a fold a window,
	// plus the sandbox's own few events (create, exec, files), each under 2 KB.
	maxDetailed := manager.DecisionBurst + int(elapsed.Seconds()+1)*manager.DecisionRate
	maxFolds := int(elapsed/manager.DecisionWindow) + 2
	if detailedDNS > maxDetailed || folds > maxFolds {
		t.Errorf("%d detailed (bound %d), %d folds (bound %d)", detailedDNS, maxDetailed, folds, maxFolds)
	}
	bound := (maxDetailed+maxFolds+20)*2048 + maxFolds*4096
	status, audit := d.api("GET", "/v1/audit/export?sandbox="+id, d.token, "")
	if status != http.StatusOK {
		t.Fatalf("audit export: %d %s", status, audit)
	}
	t.Logf("audit entries of the sandbox: %d lines, %d bytes; bound on each of events and audit %d bytes for %s (%d answered queries)",
		strings.Count(audit, "\n"), len(audit), bound, elapsed.Round(time.Second), answered)
	if evBytes > bound || len(audit) > 2*bound {
		t.Errorf("events %d bytes, audit %d bytes: over the bound %d", evBytes, len(audit), bound)
	}

	t.Run("events page to the end", func(t *testing.T) { eventsPaged(t, d, id, len(evs)) })
}

// eventsPaged adds 1,100 port connections to sandbox id's log (one event
// each) and checks the API pages them and `corral events` prints them all.
func eventsPaged(t *testing.T, d *daemon, id string, before int) {
	d.mustCLI("exec", "-d", id, "--", "python3", "-m", "http.server", "8000", "--bind", "127.0.0.1")
	url := "http://" + d.addr + "/v1/sandboxes/" + id + "/ports/8000/"
	waitServing(t, d, id)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1100/8+1; i++ {
				resp, err := http.Get(url)
				if err != nil {
					errs <- err
					return
				}
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	status, body := d.api("GET", "/v1/sandboxes/"+id+"/events?limit=1000", d.token, "")
	var page struct {
		Events []json.RawMessage `json:"events"`
		Next   int64             `json:"next"`
	}
	if err := json.Unmarshal([]byte(body), &page); status != 200 || err != nil || len(page.Events) != 1000 || page.Next == 0 {
		t.Fatalf("first page: %d, %d events, next %d, %v", status, len(page.Events), page.Next, err)
	}
	if status, body := d.api("GET", "/v1/sandboxes/"+id+"/events?limit=1001", d.token, ""); status != 400 || !strings.Contains(body, "limit") {
		t.Errorf("limit=1001: %d %s", status, body)
	}
	if status, body := d.api("GET", "/v1/sandboxes/"+id+"/events?after=x", d.token, ""); status != 400 || !strings.Contains(body, "after") {
		t.Errorf("after=x: %d %s", status, body)
	}
	lines := strings.Count(d.mustCLI("events", id), "\n")
	if want := before + 1100; lines < want {
		t.Errorf("corral events printed %d lines, want at least %d", lines, want)
	}
	if got := strings.Count(d.mustCLI("events", "--limit", "5", id), "\n"); got != 5 {
		t.Errorf("corral events --limit 5 printed %d lines", got)
	}
}
