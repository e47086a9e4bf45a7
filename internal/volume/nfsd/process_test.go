package nfsd

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The test binary is also the export's child: "nfsd ROOT ro|rw".
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "nfsd" {
		os.Exit(ChildMain(os.Args[2:]))
	}
	os.Exit(m.Run())
}

// rpcCall is one record-marked ONC RPC call to the NFS program with an
// AUTH_NULL credential whose body length is credLen (0 for an honest one).
func rpcCall(xid, proc, credLen uint32) []byte {
	var b []byte
	for _, v := range []uint32{xid, 0, 2, 100003, 3, proc, 0, credLen} {
		b = binary.BigEndian.AppendUint32(b, v)
	}
	if credLen == 0 {
		b = binary.BigEndian.AppendUint32(b, 0) // verifier flavor
		b = binary.BigEndian.AppendUint32(b, 0) // verifier length
	} else {
		b = append(b, make([]byte, 16)...) // the server reads no call under 40 bytes
	}
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))|1<<31), b...)
}

// null sends a NULL call over a fresh relayed connection and returns the
// reply's xid, or an error if the connection ends first.
func null(t *testing.T, s *Server, xid uint32) (uint32, error) {
	t.Helper()
	ours, theirs := net.Pipe()
	defer ours.Close()
	if err := s.Serve(theirs); err != nil {
		t.Fatal(err)
	}
	_ = ours.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := ours.Write(rpcCall(xid, 0, 0)); err != nil {
		return 0, err
	}
	r := bufio.NewReader(ours)
	hdr := make([]byte, 8)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint32(hdr[4:]), nil
}

func TestChildServesAndRestarts(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewServer(exe, root, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, err := null(t, s, 7); err != nil || got != 7 {
		t.Fatalf("NULL call: xid %d, %v", got, err)
	}
	// A credential claiming 2 GiB: the decoder allocates it before
	// reading, which the child's bounded address space refuses; the child
	// dies, and only this export with it.
	ours, theirs := net.Pipe()
	if err := s.Serve(theirs); err != nil {
		t.Fatal(err)
	}
	_ = ours.SetDeadline(time.Now().Add(20 * time.Second))
	_, _ = ours.Write(rpcCall(8, 0, 0x7ffffff0))
	if _, err := io.ReadAll(ours); err != nil {
		t.Fatalf("the hostile call's connection did not end: %v", err)
	}
	ours.Close()
	select {
	case <-s.exited:
	case <-time.After(20 * time.Second):
		t.Fatal("the child survived a 2 GiB allocation")
	}
	if got, err := null(t, s, 9); err != nil || got != 9 {
		t.Fatalf("NULL call after the child died: xid %d, %v", got, err)
	}
	s.Close()
	if s.aliveLocked() {
		t.Fatal("Close left the child running")
	}
}
