package sandboxlog

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Caps on what one record stores. A value past MaxValue bytes keeps its
// first MaxValue bytes, and gains two fields beside it: <key>_len (its
// length in bytes) and <key>_sha256 (the first 16 hex digits of its
// SHA-256), so the whole value can still be matched. Past MaxFields fields
// (counted before the sidecars), the rest, in key order, are dropped and
// counted in fields_dropped.
const (
	MaxValue   = 256
	MaxMessage = 512
	MaxFields  = 16
	// maxRecordBytes bounds a capped record's message and fields (keys
	// are the code's own names, under 32 bytes).
	maxRecordBytes = MaxMessage + MaxFields*(32+MaxValue+2*(32+16)) + 64
)

// capRecord returns msg and fields within the caps; fields is not
// changed (callers may share it).
func capRecord(msg string, fields map[string]string) (string, map[string]string) {
	return cut(msg, MaxMessage), capFields(fields)
}

func capFields(fields map[string]string) map[string]string {
	if len(fields) == 0 {
		return fields
	}
	keys := sortedKeys(fields)
	out := make(map[string]string, len(fields)+2)
	for i, k := range keys {
		if i == MaxFields {
			out["fields_dropped"] = strconv.Itoa(len(keys) - MaxFields)
			break
		}
		v := fields[k]
		if len(v) <= MaxValue {
			out[k] = v
			continue
		}
		sum := sha256.Sum256([]byte(v))
		out[k] = cut(v, MaxValue)
		out[k+"_len"] = strconv.Itoa(len(v))
		out[k+"_sha256"] = hex.EncodeToString(sum[:8])
	}
	return out
}

// cut shortens s to at most n bytes, at a rune boundary, marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	end := n - len(mark)
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end] + mark
}

func sortedKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }
