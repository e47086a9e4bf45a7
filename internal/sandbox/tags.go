package sandbox

import (
	"maps"
	"strings"

	"corral/internal/errdefs"
)

// ReservedTagPrefix starts the keys of tags Corral sets itself (a warm
// pool's, a fork's, a build's): an update of a live sandbox's tags may not
// set or remove them, since the daemon acts on some of them.
const ReservedTagPrefix = "corral."

// ValidTagKey reports whether k can be a tag's key.
func ValidTagKey(k string) bool { return tagKeyRE.MatchString(k) }

// ValidateTags checks a sandbox's tags: at most 64, keys matching
// tagKeyRE, values at most 256 bytes without NUL.
func ValidateTags(tags map[string]string) error {
	if len(tags) > maxTags {
		return errdefs.Invalid("tags", "at most %d tags, got %d", maxTags, len(tags))
	}
	for k, v := range tags {
		if err := validateTag(k, v); err != nil {
			return err
		}
	}
	return nil
}

func validateTag(k, v string) error {
	if !tagKeyRE.MatchString(k) || len(v) > maxTagValue || strings.ContainsRune(v, 0) {
		return errdefs.Invalid("tags", "bad tag %q (keys match %s, values at most %d bytes)", k, tagKeyRE, maxTagValue)
	}
	return nil
}

// MergeTags applies patch to tags the way a JSON merge patch (RFC 7386)
// does: a key with a value sets it, a key with nil removes it, keys not in
// patch stay. tags is not changed; the result is validated whole. Keys
// under ReservedTagPrefix are refused.
func MergeTags(tags map[string]string, patch map[string]*string) (map[string]string, error) {
	out := maps.Clone(tags)
	if out == nil {
		out = map[string]string{}
	}
	for k, v := range patch {
		if strings.HasPrefix(k, ReservedTagPrefix) {
			return nil, errdefs.Invalid("tags", "%q: keys under %q are Corral's own and cannot be changed", k, ReservedTagPrefix)
		}
		if v == nil {
			delete(out, k)
			continue
		}
		if err := validateTag(k, *v); err != nil {
			return nil, err
		}
		out[k] = *v
	}
	if len(out) > maxTags {
		return nil, errdefs.Invalid("tags", "at most %d tags, the update makes %d", maxTags, len(out))
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}
