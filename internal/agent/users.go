package agent

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"corral/internal/errdefs"
	"corral/internal/fspath"
)

// maxAccountFile bounds how much of /etc/passwd or /etc/group is read; the
// sandbox's code can write those files.
const maxAccountFile = 4 << 20

// account is a resolved process user.
type account struct {
	name string
	uid  uint32
	gid  uint32
	home string
}

var rootAccount = account{name: "root", uid: 0, gid: 0, home: "/root"}

// passwdEntry is one line of /etc/passwd.
type passwdEntry struct {
	name string
	uid  uint32
	gid  uint32
	home string
}

// lookupUser resolves a user spec: a name, a uid, or uid:gid (the user part
// may also be a name), from the sandbox's /etc/passwd. An unknown numeric uid
// is allowed, with gid 0 and home "/" (as runc does); an unknown name is not.
func (s *Server) lookupUser(spec string) (account, error) {
	if spec == "" {
		spec = "root"
	}
	userPart, groupPart, hasGroup := strings.Cut(spec, ":")
	acct, err := s.lookupUserPart(userPart)
	if err != nil {
		return account{}, err
	}
	if hasGroup {
		gid, ok := parseID(groupPart)
		if !ok {
			return account{}, errdefs.Invalid("user", "gid %q is not a number", groupPart)
		}
		acct.gid = gid
	}
	return acct, nil
}

func (s *Server) lookupUserPart(user string) (account, error) {
	entries := s.readPasswd()
	if uid, ok := parseID(user); ok {
		for _, e := range entries {
			if e.uid == uid {
				return account(e), nil
			}
		}
		if uid == 0 {
			return rootAccount, nil
		}
		return account{name: user, uid: uid, gid: 0, home: "/"}, nil
	}
	for _, e := range entries {
		if e.name == user {
			return account(e), nil
		}
	}
	if user == "root" {
		return rootAccount, nil
	}
	return account{}, errdefs.Invalid("user", "no user %q in /etc/passwd", user)
}

// parseID parses a uid or gid; -1 (4294967295) is not an id.
func parseID(s string) (uint32, bool) {
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil || n == 1<<32-1 {
		return 0, false
	}
	return uint32(n), true
}

// readPasswd parses the sandbox's /etc/passwd; a missing or unreadable file
// yields no entries.
func (s *Server) readPasswd() []passwdEntry {
	var out []passwdEntry
	s.scanAccountFile("/etc/passwd", func(f []string) {
		if len(f) < 6 {
			return
		}
		uid, ok1 := parseID(f[2])
		gid, ok2 := parseID(f[3])
		if !ok1 || !ok2 || f[0] == "" {
			return
		}
		home := f[5]
		if !strings.HasPrefix(home, "/") {
			home = "/"
		}
		out = append(out, passwdEntry{name: f[0], uid: uid, gid: gid, home: home})
	})
	return out
}

// scanAccountFile calls fn with the colon-separated fields of each line of
// a passwd-style file inside the root.
func (s *Server) scanAccountFile(path string, fn func([]string)) {
	host, err := fspath.Resolve(s.root, path)
	if err != nil {
		return
	}
	f, err := os.OpenFile(host, os.O_RDONLY|nonBlockNoFollow, 0)
	if err != nil {
		return
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return
	}
	sc := bufio.NewScanner(io.LimitReader(f, maxAccountFile))
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fn(strings.Split(line, ":"))
	}
}

// idNames maps uids and gids to names for EntryInfo, reading the account
// files once per request.
type idNames struct {
	s      *Server
	loaded bool
	users  map[uint32]string
	groups map[uint32]string
}

func (n *idNames) load() {
	if n.loaded {
		return
	}
	n.loaded = true
	n.users = make(map[uint32]string)
	n.groups = make(map[uint32]string)
	for _, e := range n.s.readPasswd() {
		if _, dup := n.users[e.uid]; !dup {
			n.users[e.uid] = e.name
		}
	}
	n.s.scanAccountFile("/etc/group", func(f []string) {
		if len(f) < 3 {
			return
		}
		if gid, ok := parseID(f[2]); ok && f[0] != "" {
			if _, dup := n.groups[gid]; !dup {
				n.groups[gid] = f[0]
			}
		}
	})
}

func (n *idNames) user(uid uint32) string {
	n.load()
	if name, ok := n.users[uid]; ok {
		return name
	}
	if uid == 0 {
		return "root"
	}
	return fmt.Sprint(uid)
}

func (n *idNames) group(gid uint32) string {
	n.load()
	if name, ok := n.groups[gid]; ok {
		return name
	}
	if gid == 0 {
		return "root"
	}
	return fmt.Sprint(gid)
}
