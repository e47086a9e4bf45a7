package store

import (
	"fmt"
	"maps"
	"regexp"
	"strings"

	"corral/internal/errdefs"
)

const maxRefLen = 255

var (
	nameRE = regexp.MustCompile(`^(?:[a-zA-Z0-9](?:[a-zA-Z0-9.-]*[a-zA-Z0-9])?(?::[0-9]{1,5})?/)?` +
		`[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$`)
	tagRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
)

// ParseRef validates a tag reference and returns it as name:tag; a bare
// name means name:latest. Digests are not tag references.
func ParseRef(ref string) (string, error) {
	if len(ref) == 0 || len(ref) > maxRefLen {
		return "", errdefs.Invalid("ref", "length must be 1 to %d", maxRefLen)
	}
	name, tag := ref, "latest"
	if i := strings.LastIndexByte(ref, ':'); i >= 0 && !strings.Contains(ref[i+1:], "/") {
		name, tag = ref[:i], ref[i+1:]
	}
	if name == "sha256" {
		return "", errdefs.Invalid("ref", "%q is a digest, not a tag", truncate(ref))
	}
	if !nameRE.MatchString(name) || !tagRE.MatchString(tag) {
		return "", errdefs.Invalid("ref", "%q is not name[:tag] (lowercase name components, tag [A-Za-z0-9_.-])", truncate(ref))
	}
	full := name + ":" + tag
	if len(full) > maxRefLen {
		return "", errdefs.Invalid("ref", "length must be at most %d", maxRefLen)
	}
	return full, nil
}

// tagsFile is tags.json.
type tagsFile struct {
	Schema int               `json:"schema"`
	Tags   map[string]Digest `json:"tags"`
}

// readTags reads and validates tags.json; missing means no tags. Caller
// holds s.mu.
func (s *Store) readTags() (map[string]Digest, error) {
	p := s.path("tags.json")
	b, err := readBounded(p, maxTagsFile)
	if isNotExist(err) {
		return map[string]Digest{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading tags: %w", err)
	}
	var f tagsFile
	if err := decodeStrict(p, b, &f); err != nil {
		return nil, err
	}
	if f.Schema != 1 {
		return nil, fmt.Errorf("corrupt record %s: schema %d", p, f.Schema)
	}
	out := make(map[string]Digest, len(f.Tags))
	for ref, d := range f.Tags {
		norm, err := ParseRef(ref)
		if err != nil || norm != ref {
			return nil, fmt.Errorf("corrupt record %s: bad tag %q", p, truncate(ref))
		}
		if _, err := ParseDigest(string(d)); err != nil {
			return nil, fmt.Errorf("corrupt record %s: tag %s: %w", p, ref, err)
		}
		out[ref] = d
	}
	return out, nil
}

func (s *Store) writeTags(tags map[string]Digest) error {
	if err := writeJSONAtomic(s.path("tags.json"), tagsFile{Schema: 1, Tags: maps.Clone(tags)}); err != nil {
		return fmt.Errorf("writing tags: %w", err)
	}
	return nil
}
