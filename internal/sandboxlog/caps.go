package sandboxlog

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Caps on what one record stores, measured as stored (JSON, where a
// hostile "<" takes 6 bytes). A value past MaxValue bytes keeps its first
// MaxValue, and gains two fields beside it: <key>_len (its length in
// bytes) and <key>_sha256 (the first 16 hex digits of its SHA-256), so the
// whole value can still be matched. Past MaxFields fields (counted before
// the sidecars), the rest, in key order, are dropped and counted in
// fields_dropped.
const (
	MaxValue   = 256
	MaxMessage = 512
	MaxFields  = 16
	// MaxRecordBytes bounds one stored record: an event as the API gives
	// it (message, fields, kind, ids, time), or an audit entry (fields,
	// kind, caller, ids, hashes). Keys are the code's own names, under 32
	// bytes.
	MaxRecordBytes = MaxMessage + MaxFields*(32+MaxValue+2*(40+24)+8) + 1024
)

// capRecord returns msg and fields within the caps; fields is not
// changed (callers may share it).
func capRecord(msg string, fields map[string]string) (string, map[string]string) {
	return cutJSON(msg, MaxMessage), capFields(fields)
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
		if jsonLen(v) <= MaxValue {
			out[k] = v
			continue
		}
		sum := sha256.Sum256([]byte(v))
		out[k] = cutJSON(v, MaxValue)
		out[k+"_len"] = strconv.Itoa(len(v))
		out[k+"_sha256"] = hex.EncodeToString(sum[:8])
	}
	return out
}

// cutJSON shortens s so that its JSON encoding is at most n bytes, at a
// rune boundary, marking the cut.
func cutJSON(s string, n int) string {
	const mark = "…"
	if jsonLen(s) <= n {
		return s
	}
	size, end := 0, 0
	for i, r := range s {
		w := runeJSONLen(r, s[i:])
		if size+w > n-len(mark) {
			break
		}
		size += w
		end = i + utf8.RuneLen(r)
		if r == utf8.RuneError {
			end = i + 1
		}
	}
	return s[:end] + mark
}

// jsonLen is the length of s's JSON encoding, quotes aside.
func jsonLen(s string) int {
	n := 0
	for i, r := range s {
		n += runeJSONLen(r, s[i:])
	}
	return n
}

// runeJSONLen is what r, at the start of rest, takes in encoding/json's
// output: \u00XX for control characters, <, >, & and the line
// separators, \ufffd for an invalid byte.
func runeJSONLen(r rune, rest string) int {
	switch {
	case r == utf8.RuneError && len(rest) > 0 && rest[0] >= utf8.RuneSelf:
		if _, size := utf8.DecodeRuneInString(rest); size == 1 {
			return 6
		}
		return 3
	case r == '"' || r == '\\' || r == '\n' || r == '\r' || r == '\t':
		return 2
	case r < 0x20 || r == '<' || r == '>' || r == '&' || r == '\u2028' || r == '\u2029':
		return 6
	}
	return utf8.RuneLen(r)
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
