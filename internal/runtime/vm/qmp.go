package vm

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// qmp is a connection to QEMU's machine protocol (the -qmp socket).
type qmp struct {
	conn   net.Conn
	r      *bufio.Reader
	events []json.RawMessage // events read while waiting for replies
}

// dialQMP connects and negotiates capabilities.
func dialQMP(ctx context.Context, path string) (*qmp, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("qmp: %w", err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	q := &qmp{conn: conn, r: bufio.NewReader(conn)}
	if _, err := q.r.ReadBytes('\n'); err != nil { // the greeting
		conn.Close()
		return nil, fmt.Errorf("qmp greeting: %w", err)
	}
	if _, err := q.exec("qmp_capabilities", nil); err != nil {
		conn.Close()
		return nil, err
	}
	return q, nil
}

func (q *qmp) close() { q.conn.Close() }

// exec runs one command and returns its "return" value; events that
// arrive meanwhile are skipped.
func (q *qmp) exec(cmd string, args any) (json.RawMessage, error) {
	req := map[string]any{"execute": cmd}
	if args != nil {
		req["arguments"] = args
	}
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	if _, err := q.conn.Write(append(b, '\n')); err != nil {
		return nil, fmt.Errorf("qmp %s: %w", cmd, err)
	}
	return q.reply(cmd)
}

// sendFD hands f to QEMU under name (getfd, the descriptor passed with
// SCM_RIGHTS), for a later "fd:name" migration.
func (q *qmp) sendFD(name string, f *os.File) error {
	b, err := json.Marshal(map[string]any{"execute": "getfd", "arguments": map[string]string{"fdname": name}})
	if err != nil {
		return err
	}
	uc, ok := q.conn.(*net.UnixConn)
	if !ok {
		return fmt.Errorf("qmp getfd: not a unix socket")
	}
	if _, _, err := uc.WriteMsgUnix(append(b, '\n'), unix.UnixRights(int(f.Fd())), nil); err != nil {
		return fmt.Errorf("qmp getfd: %w", err)
	}
	_, err = q.reply("getfd")
	return err
}

// reply reads until the answer to cmd, skipping events.
func (q *qmp) reply(cmd string) (json.RawMessage, error) {
	for {
		line, err := q.r.ReadBytes('\n')
		if err != nil {
			return nil, fmt.Errorf("qmp %s: %w", cmd, err)
		}
		var resp struct {
			Return json.RawMessage `json:"return"`
			Error  *struct {
				Class, Desc string
			} `json:"error"`
			Event string `json:"event"`
		}
		if err := json.Unmarshal(line, &resp); err != nil {
			return nil, fmt.Errorf("qmp %s: %w", cmd, err)
		}
		switch {
		case resp.Event != "":
			q.events = append(q.events, append(json.RawMessage(nil), line...))
			continue
		case resp.Error != nil:
			return nil, fmt.Errorf("qmp %s: %s: %s", cmd, resp.Error.Class, resp.Error.Desc)
		default:
			return resp.Return, nil
		}
	}
}

// waitMigration polls query-migrate until the migration completed.
func (q *qmp) waitMigration(ctx context.Context) error {
	for {
		raw, err := q.exec("query-migrate", nil)
		if err != nil {
			return err
		}
		var st struct {
			Status    string `json:"status"`
			ErrorDesc string `json:"error-desc"`
		}
		if err := json.Unmarshal(raw, &st); err != nil {
			return err
		}
		switch st.Status {
		case "completed":
			return nil
		case "failed", "cancelled":
			return fmt.Errorf("migration %s: %s (%s)", st.Status, st.ErrorDesc, raw)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitDeviceDeleted waits for the DEVICE_DELETED event of device id.
func (q *qmp) waitDeviceDeleted(id string, timeout time.Duration) error {
	return q.waitEvent("DEVICE_DELETED", timeout, func(data json.RawMessage) bool {
		var d struct {
			Device string `json:"device"`
		}
		return json.Unmarshal(data, &d) == nil && d.Device == id
	})
}

// waitEvent waits for the event name whose data match accepts, dropping
// the events before it.
func (q *qmp) waitEvent(name string, timeout time.Duration, match func(json.RawMessage) bool) error {
	deadline := time.Now().Add(timeout)
	_ = q.conn.SetReadDeadline(deadline)
	defer q.conn.SetReadDeadline(time.Time{})
	for {
		for i, raw := range q.events {
			var ev struct {
				Event string          `json:"event"`
				Data  json.RawMessage `json:"data"`
			}
			if json.Unmarshal(raw, &ev) == nil && ev.Event == name && match(ev.Data) {
				q.events = q.events[i+1:]
				return nil
			}
		}
		q.events = nil
		line, err := q.r.ReadBytes('\n')
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", name, err)
		}
		q.events = append(q.events, line)
	}
}
