package corral

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"

	"corral/pkg/apiv1"
)

// maxBuildEventLine bounds one NDJSON line of a build stream.
const maxBuildEventLine = 4 << 20

// UploadLayer sends a layer tar (plain or gzip) to the daemon's store and
// returns its digest (the sha256 of the uncompressed tar).
func (c *Client) UploadLayer(ctx context.Context, r io.Reader) (apiv1.LayerInfo, error) {
	var out apiv1.LayerInfo
	resp, err := c.do(ctx, "POST", "/v1/images/layers", nil, io.NopCloser(r), "application/x-tar")
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	return out, json.NewDecoder(resp.Body).Decode(&out)
}

// Layer reports a layer the daemon holds; a *Error with code not_found
// when it has none.
func (c *Client) Layer(ctx context.Context, digest string) (apiv1.LayerInfo, error) {
	var out apiv1.LayerInfo
	err := c.call(ctx, "GET", "/v1/images/layers/"+escapeRef(digest), nil, nil, &out)
	return out, err
}

// BuildStream is a running build's events.
type BuildStream struct {
	body io.ReadCloser
	sc   *bufio.Scanner
}

// Build starts a build; read its progress with Next. Copy steps must name
// layers already uploaded.
func (c *Client) Build(ctx context.Context, req apiv1.BuildRequest) (*BuildStream, error) {
	resp, err := c.doJSON(ctx, "POST", "/v1/images/build", req)
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), maxBuildEventLine)
	return &BuildStream{body: resp.Body, sc: sc}, nil
}

// Next returns the next event; io.EOF once the stream ended.
func (b *BuildStream) Next() (apiv1.BuildEvent, error) {
	return nextLine[apiv1.BuildEvent](b.sc, "build event")
}

// Close ends the stream; a build nobody else waits for is cancelled.
func (b *BuildStream) Close() error { return b.body.Close() }

// Wait reads events until the build ends, passing each to fn (if not nil),
// and returns the built image or the build's error.
func (b *BuildStream) Wait(fn func(apiv1.BuildEvent)) (*apiv1.Image, error) {
	for {
		ev, err := b.Next()
		if errors.Is(err, io.EOF) {
			return nil, errors.New("build stream ended without a result")
		}
		if err != nil {
			return nil, err
		}
		if fn != nil {
			fn(ev)
		}
		switch ev.Type {
		case apiv1.BuildEventDone:
			return ev.Image, nil
		case apiv1.BuildEventError:
			if ev.Error == nil {
				return nil, errors.New("build failed")
			}
			return nil, &Error{Status: 200, Code: ev.Error.Code, Message: ev.Error.Message}
		}
	}
}

// SnapshotFS turns a running sandbox's files into an image (its image plus
// one layer of its changes), tagged tag when set, and lists what the image
// could not hold (device nodes, FIFOs, sockets). The sandbox keeps
// running.
func (c *Client) SnapshotFS(ctx context.Context, id, tag string) (*apiv1.SnapshotFSResult, error) {
	var res apiv1.SnapshotFSResult
	if err := c.call(ctx, "POST", sbPath(id, "/snapshots/fs"), nil, apiv1.SnapshotFSRequest{Tag: tag}, &res); err != nil {
		return nil, err
	}
	return &res, nil
}
