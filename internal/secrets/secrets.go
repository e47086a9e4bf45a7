// Package secrets is the contract of named secrets: what a secret's name,
// keys and values may be, and the egress header rules that inject a value
// into a sandbox's requests (HeaderRule). It owns no storage (the records
// store seals values with a purpose-bound subkey of the daemon's key) and
// no network code; it imports only corral/internal/errdefs and the
// standard library.
//
// Errors never carry a value: a caller may pass what it was given, and an
// error message is shown to whoever sent it, logged, and stored.
package secrets

import (
	"regexp"
	"sort"
	"strings"

	"corral/internal/errdefs"
)

// Bounds.
const (
	MaxKeys       = 64
	MaxValueBytes = 64 << 10
	MaxTotalBytes = 256 << 10
	// MaxPerSandbox bounds the secrets one sandbox or process names.
	MaxPerSandbox = 16
)

var (
	nameRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$`)
	keyRE  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
)

// ValidateName checks a secret's name: 1 to 63 letters, digits, '_', '.'
// and '-', starting with a letter or digit, and no "..".
func ValidateName(field, name string) error {
	if !nameRE.MatchString(name) || strings.Contains(name, "..") {
		return errdefs.Invalid(field, "%q is not a secret name (letters, digits, '_', '.', '-'; at most 63; no '..' or '/')", clip(name))
	}
	return nil
}

// ValidateNames checks a list of secret names (a sandbox's or a process's).
func ValidateNames(field string, names []string) error {
	if len(names) > MaxPerSandbox {
		return errdefs.Invalid(field, "at most %d secrets, got %d", MaxPerSandbox, len(names))
	}
	seen := map[string]bool{}
	for _, n := range names {
		if err := ValidateName(field, n); err != nil {
			return err
		}
		if seen[n] {
			return errdefs.Invalid(field, "%q named twice", n)
		}
		seen[n] = true
	}
	return nil
}

// ValidateValues checks a secret's keys and values. The error names a key,
// never a value.
func ValidateValues(field string, values map[string]string) error {
	if len(values) == 0 {
		return errdefs.Invalid(field, "a secret needs at least one key")
	}
	if len(values) > MaxKeys {
		return errdefs.Invalid(field, "at most %d keys, got %d", MaxKeys, len(values))
	}
	total := 0
	for k, v := range values {
		if !keyRE.MatchString(k) {
			// Not echoed: a mistyped entry may hold the value.
			return errdefs.Invalid(field, "a key is not an environment variable name (letters, digits and '_', not starting with a digit; at most 128)")
		}
		if len(v) > MaxValueBytes {
			return errdefs.Invalid(field, "the value of %s is over %d bytes", k, MaxValueBytes)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return errdefs.Invalid(field, "the value of %s holds a NUL byte", k)
		}
		total += len(k) + len(v)
	}
	if total > MaxTotalBytes {
		return errdefs.Invalid(field, "keys and values are over %d bytes together", MaxTotalBytes)
	}
	return nil
}

// Keys returns a secret's keys, sorted.
func Keys(values map[string]string) []string {
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// clip shortens what a caller sent (a name that is not one, so not a
// value) for an error message.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
