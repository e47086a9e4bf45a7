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
// whole value can still be matched. The fields together, sidecars
// included, take at most MaxFieldsBytes: a field that would pass it is cut
// to shortValue, and one that still would is dropped and counted in
// fields_dropped (fields are taken in key order).
const (
	MaxValue       = 256
	MaxMessage     = 384
	MaxFieldsBytes = 1536
	// MaxRecordBytes bounds one stored record: an event as the API gives
	// it (message, fields, kind, ids, time), or an audit entry (fields,
	// kind, caller, ids, hashes).
	MaxRecordBytes = MaxMessage + MaxFieldsBytes + 512
	shortValue     = 64
	// droppedRoom is kept free for fields_dropped.
	droppedRoom = 32
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
	out := make(map[string]string, len(fields)+2)
	size, dropped := 2, 0 // {}
	for _, k := range sortedKeys(fields) {
		kv := capValue(k, fields[k], MaxValue)
		n := pairsSize(kv)
		if size+n > MaxFieldsBytes-droppedRoom {
			kv = capValue(k, fields[k], shortValue)
			n = pairsSize(kv)
		}
		if size+n > MaxFieldsBytes-droppedRoom {
			dropped++
			continue
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		size += n
	}
	if dropped > 0 {
		out["fields_dropped"] = strconv.Itoa(dropped)
	}
	return out
}

// capValue is key and v cut to max bytes as JSON, as key/value pairs:
// with its length and hash beside it when it was cut.
func capValue(key, v string, max int) []string {
	if jsonLen(v) <= max {
		return []string{key, v}
	}
	sum := sha256.Sum256([]byte(v))
	return []string{key, cutJSON(v, max), key + "_len", strconv.Itoa(len(v)), key + "_sha256", hex.EncodeToString(sum[:8])}
}

// pairsSize is what key/value pairs take in a JSON object.
func pairsSize(kv []string) int {
	n := 0
	for i := 0; i < len(kv); i += 2 {
		n += jsonLen(kv[i]) + jsonLen(kv[i+1]) + 6 // quotes, colon, comma
	}
	return n
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
