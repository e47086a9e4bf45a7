package manager

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"corral/internal/sandbox"
)

// AccessToken is the token an E2B client presents to the sandbox's envd
// face (envdAccessToken; X-Access-Token) and signs file URLs with. Like
// PortToken it is derived, never stored: an HMAC of the sandbox's id and
// creation time under the daemon's port key, with a label of its own so
// that neither token reveals the other.
func (m *Manager) AccessToken(sb *sandbox.Sandbox) string {
	mac := hmac.New(sha256.New, m.cfg.PortKey)
	fmt.Fprintf(mac, "corral envd access token\x00%s\x00%d", sb.ID, sb.CreatedAt.UnixNano())
	return hex.EncodeToString(mac.Sum(nil)[:24])
}
