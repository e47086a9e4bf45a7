package main

import (
	"fmt"
	"io"
	"os"
)

// maxCACertBytes is the daemon's bound on one CA file (sandbox.MaxCACertBytes).
const maxCACertBytes = 32 << 10

// readCACerts reads the PEM files named by --ca-cert, each bounded to the
// size the daemon accepts (a larger one is named here, not sent).
func readCACerts(paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, fmt.Errorf("--ca-cert: %w", err)
		}
		b, err := io.ReadAll(io.LimitReader(f, maxCACertBytes+1))
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("--ca-cert %s: %w", p, err)
		}
		if len(b) > maxCACertBytes {
			return nil, fmt.Errorf("--ca-cert %s: over %d bytes", p, maxCACertBytes)
		}
		out = append(out, string(b))
	}
	return out, nil
}
