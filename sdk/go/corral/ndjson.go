package corral

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
)

// nextLine decodes the next NDJSON line of sc into a T; io.EOF once the
// stream ended. what names the event kind in errors.
func nextLine[T any](sc *bufio.Scanner, what string) (T, error) {
	var ev T
	if !sc.Scan() {
		if err := sc.Err(); err != nil {
			return ev, err
		}
		return ev, io.EOF
	}
	if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
		return ev, fmt.Errorf("decoding %s: %w", what, err)
	}
	return ev, nil
}
