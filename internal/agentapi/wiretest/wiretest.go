// Package wiretest reads what a peer of the agent protocol's transport
// sends first (its HTTP/2 SETTINGS and connection window), for the tests
// on both sides (internal/agent, internal/agentapi) that check the bounds
// docs/AGENT_PROTOCOL.md promises. It is never part of the corral binary.
package wiretest

import (
	"testing"

	"golang.org/x/net/http2"
)

// FirstFrames reads frames until the peer's SETTINGS (not an ack) and a
// connection-level WINDOW_UPDATE have both arrived, and returns the
// settings and the connection's receive window (RFC 9113's initial 65,535
// plus the updates).
func FirstFrames(t testing.TB, fr *http2.Framer) (map[http2.SettingID]uint32, uint32) {
	t.Helper()
	got := map[http2.SettingID]uint32{}
	var connWindow uint32 = 65535
	for sawSettings, sawUpdate := false, false; !sawSettings || !sawUpdate; {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading the peer's first frames: %v", err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = f.ForeachSetting(func(s http2.Setting) error { got[s.ID] = s.Val; return nil })
				sawSettings = true
			}
		case *http2.WindowUpdateFrame:
			if f.StreamID == 0 {
				connWindow += f.Increment
				sawUpdate = true
			}
		}
	}
	return got, connWindow
}
