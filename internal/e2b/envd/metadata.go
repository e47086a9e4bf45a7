package envd

import (
	"net/http"
	"strings"

	"corral/internal/agentapi"
	"corral/internal/errdefs"
)

// Upload metadata, as E2B's envd keeps it: each X-Metadata-<key> header
// of POST /files becomes the extended attribute user.e2b.<key> of every
// file the upload writes (key lowercased, the first value of a repeated
// header), replacing what an earlier upload left (an upload without them
// clears them). Keys and values are printable US-ASCII; a whole attribute
// name fits the kernel's 255 bytes and all of them, prefix counted per
// key, fit 4096 bytes. Where a runtime's filesystem has no user.*
// attributes the upload succeeds without them and its answer has no
// metadata.
const (
	metadataHeader = "X-Metadata-"
	metadataXattr  = "user.e2b."
)

// uploadMetadata reads and checks a request's X-Metadata-* headers; the
// set is never nil, so that a write replaces the file's metadata.
func uploadMetadata(h http.Header) (*agentapi.XattrSet, error) {
	set := &agentapi.XattrSet{Prefix: metadataXattr}
	total := 0
	for name, vals := range h {
		if len(name) <= len(metadataHeader) || !strings.EqualFold(name[:len(metadataHeader)], metadataHeader) || len(vals) == 0 {
			continue
		}
		key := strings.ToLower(name[len(metadataHeader):])
		if !printableASCII(key) || !printableASCII(vals[0]) {
			return nil, errdefs.Invalid(metadataHeader+"*", "header %.60q: keys and values must be printable US-ASCII", name)
		}
		if len(metadataXattr)+len(key) > agentapi.MaxXattrName {
			return nil, errdefs.Invalid(metadataHeader+"*", "key %.40q is over %d bytes", key, agentapi.MaxXattrName-len(metadataXattr))
		}
		if set.Values == nil {
			set.Values = map[string]string{}
		}
		set.Values[key] = vals[0]
		total += len(metadataXattr) + len(key) + len(vals[0])
	}
	if total > agentapi.MaxXattrTotal {
		return nil, errdefs.Invalid(metadataHeader+"*", "%d bytes of metadata (keys, values and the %q prefix of each), over %d",
			total, metadataXattr, agentapi.MaxXattrTotal)
	}
	return set, nil
}

func printableASCII(s string) bool {
	for i := range len(s) {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
