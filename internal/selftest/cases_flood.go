package selftest

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"corral/pkg/apiv1"
)

// The daemon's budget of a sandbox's detailed records (sandboxlog.Burst,
// Rate, Window and EvidencePerWindow: a test keeps them equal; the
// selftest is a client and does not import the daemon).
const (
	trailBurst        = 200
	trailRate         = 2
	trailWindow       = 10 * time.Second
	evidencePerWindow = 10
)

// trailBound is the most detailed records a sandbox may leave in elapsed:
// the burst, the rate, and the protected denials detailed past them.
func trailBound(elapsed time.Duration) int {
	windows := int(elapsed/trailWindow) + 2
	return trailBurst + int(elapsed.Seconds()+1)*trailRate + windows*evidencePerWindow
}

// flooder sends argv[2] UDP datagrams and as many TCP connection attempts
// to argv[1], never waiting for an answer: every one is a network decision
// the daemon must log or fold.
const flooder = `
import socket, sys
dst, n = sys.argv[1], int(sys.argv[2])
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(n):
    try:
        u.sendto(b"flood", (dst, 9000 + i % 500))
    except OSError:
        pass
    t = socket.socket()
    t.setblocking(False)
    t.connect_ex((dst, 9000 + i % 500))
    t.close()
`

// exhaustDecisionLog: the attacker floods the network with denied
// attempts; its detailed decisions stay within the daemon's budget and
// the rest are counted in folds, never dropped in silence.
func exhaustDecisionLog(ctx context.Context, s *session) Result {
	const n = 4000
	tried := fmt.Sprintf("send %d UDP datagrams and %d TCP connection attempts to %s, all denied, as fast as possible", n, n, internalAddr)
	before, err := s.c.Events(ctx, s.a.id)
	if err != nil {
		return inconclusive(tried, err)
	}
	var after int64
	if len(before) > 0 {
		after = before[len(before)-1].Seq
	}
	start := time.Now()
	req := apiv1.ExecRequest{Cmd: []string{"python3", "-c", flooder, internalAddr, strconv.Itoa(n)}, Timeout: 120}
	if _, err := s.c.Run(ctx, s.a.id, req, nil, io.Discard, io.Discard); err != nil {
		return inconclusive(tried, err)
	}
	time.Sleep(trailWindow + 2*time.Second) // the window's fold is written once it ends
	elapsed := time.Since(start)
	evs, err := s.c.EventsAfter(ctx, s.a.id, after, 0)
	if err != nil {
		return inconclusive(tried, err)
	}
	detailed, folded, folds := 0, 0, 0
	for _, e := range evs {
		switch {
		case strings.HasPrefix(e.Kind, "egress_"):
			detailed++
		case e.Kind == "limit_reached" && e.Fields["resource"] == "trail":
			f, _ := strconv.Atoi(e.Fields["folded"])
			folded += f
			folds++
		}
	}
	bound := trailBound(elapsed)
	if folds == 0 && detailed < trailBurst {
		return inconclusive(tried, fmt.Errorf("only %d decisions were logged and none folded: the flood did not reach the bound", detailed))
	}
	return verdict(detailed <= bound && folds > 0 && folded > 0, tried,
		"%d detailed decisions (bound %d in %s), %d more counted in %d folds", detailed, bound, elapsed.Round(time.Second), folded, folds)
}
