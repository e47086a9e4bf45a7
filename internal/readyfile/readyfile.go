// Package readyfile writes a server's ready file (`corral serve
// --ready-file`): a JSON object, usually the bound addresses, put in place
// whole or not at all once the server serves, so a caller that gave port 0
// learns the ports and knows the server is up. It imports nothing of
// Corral's.
package readyfile

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// Write puts v, as JSON, at path through a temporary file renamed into
// place (0600).
func Write(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".ready-*")
	if err != nil {
		return fmt.Errorf("--ready-file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("--ready-file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("--ready-file: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("--ready-file: %w", err)
	}
	return nil
}
