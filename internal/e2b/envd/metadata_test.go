package envd

import (
	"errors"
	"maps"
	"net/http"
	"strings"
	"testing"

	"corral/internal/errdefs"
)

// X-Metadata-* headers become a user.e2b.* set with E2B's rules: keys
// lowercased, the first of repeated values, no headers an empty set that
// clears, and 400 for what envd refuses.
func TestUploadMetadata(t *testing.T) {
	tests := []struct {
		name    string
		headers [][2]string
		want    map[string]string
		bad     bool
	}{
		{"none", [][2]string{{"X-Access-Token", "t"}}, nil, false},
		{"lowercased", [][2]string{{"X-Metadata-Author", "ann"}, {"x-metadata-Purpose", "up load"}}, map[string]string{"author": "ann", "purpose": "up load"}, false},
		{"first value", [][2]string{{"X-Metadata-A", "1"}, {"X-Metadata-A", "2"}}, map[string]string{"a": "1"}, false},
		{"empty value", [][2]string{{"X-Metadata-E", ""}}, map[string]string{"e": ""}, false},
		{"prefix only", [][2]string{{"X-Metadata-", "x"}}, nil, false},
		{"non-ASCII value", [][2]string{{"X-Metadata-A", "caf\xc3\xa9"}}, nil, true},
		{"control byte", [][2]string{{"X-Metadata-A", "a\tb"}}, nil, true},
		{"key too long", [][2]string{{"X-Metadata-" + strings.Repeat("k", 247), "v"}}, nil, true},
		{"longest key", [][2]string{{"X-Metadata-" + strings.Repeat("k", 246), "v"}}, map[string]string{strings.Repeat("k", 246): "v"}, false},
		{"over 4096 bytes", [][2]string{{"X-Metadata-A", strings.Repeat("v", 2000)}, {"X-Metadata-B", strings.Repeat("v", 2080)}}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for _, kv := range tt.headers {
				h[kv[0]] = append(h[kv[0]], kv[1])
			}
			set, err := uploadMetadata(h)
			if tt.bad {
				if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "X-Metadata-") {
					t.Fatalf("err %v, want invalid naming X-Metadata-", err)
				}
				return
			}
			if err != nil || set == nil || set.Prefix != "user.e2b." || !maps.Equal(set.Values, tt.want) {
				t.Fatalf("got %+v, %v; want %v", set, err, tt.want)
			}
			if err := set.Validate(); err != nil {
				t.Fatalf("the agent would refuse the set: %v", err)
			}
		})
	}
}
