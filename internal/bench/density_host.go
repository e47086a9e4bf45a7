package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"corral/internal/cgroups"
	"corral/internal/mountinfo"
)

// leakSettle is how long the leak check waits for leftovers to go before
// it reports them.
const leakSettle = 10 * time.Second

// hostUsed is MemTotal - MemAvailable from /proc/meminfo, in bytes.
func hostUsed() (uint64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("reading host memory: %w", err)
	}
	var total, avail uint64
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseUint(f[1], 10, 64)
		switch f[0] {
		case "MemTotal:":
			total = v << 10
		case "MemAvailable:":
			avail = v << 10
		}
	}
	if total == 0 || avail == 0 {
		return 0, errors.New("reading host memory: no MemTotal or MemAvailable in /proc/meminfo")
	}
	return total - avail, nil
}

// countLinks counts the host's network interfaces whose name starts with
// prefix ("" counts none).
func countLinks(prefix string) (int, error) {
	if prefix == "" {
		return 0, nil
	}
	ifs, err := net.Interfaces()
	if err != nil {
		return 0, fmt.Errorf("listing network interfaces: %w", err)
	}
	n := 0
	for _, i := range ifs {
		if strings.HasPrefix(i.Name, prefix) {
			n++
		}
	}
	return n, nil
}

// leftovers is what the leak check found of the benchmark's sandboxes.
type leftovers struct {
	runsc, runscTotal int // ours in runsc list, and everything it lists
	links             int // host links with the prefix (the daemon's, any sandbox)
	dirs              int // <state>/sandboxes/<id>, net/netns/<id>, net/slots/<id>.json
	cgroups           int // <parent>/<id> in any hierarchy
	mounts            int // mount points naming one of ours
	procs             int // processes whose command line names one of ours
	errs              []error
}

func (l leftovers) clean(linksBefore int) bool {
	return l.runsc+l.dirs+l.cgroups+l.mounts+l.procs == 0 && l.links <= linksBefore && len(l.errs) == 0
}

// leakCheck looks for anything of the removed sandboxes on the host,
// waiting up to leakSettle for it to go, and reports what it found.
func (d *densityRun) leakCheck(ctx context.Context, linksBefore int, out io.Writer) error {
	deadline := time.Now().Add(leakSettle)
	var l leftovers
	for {
		l = d.findLeftovers(ctx)
		if l.clean(linksBefore) || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	fmt.Fprintf(out, "leak check (%d removed sandboxes)\n", len(d.ids))
	fmt.Fprintf(out, "  %-12s %d of ours (runsc list under %s: %d containers)\n", "runsc", l.runsc, d.runscRoot(), l.runscTotal)
	fmt.Fprintf(out, "  %-12s %d named %s* (%d before the run)\n", "links", l.links, d.dc.LinkPrefix, linksBefore)
	fmt.Fprintf(out, "  %-12s %d sandbox dirs, netns files and slots of ours\n", "state", l.dirs)
	fmt.Fprintf(out, "  %-12s %d of ours under %s\n", "cgroups", l.cgroups, d.dc.CgroupParent)
	fmt.Fprintf(out, "  %-12s %d mounts, %d processes naming ours\n", "host", l.mounts, l.procs)
	for _, err := range l.errs {
		fmt.Fprintf(out, "  %-12s %v\n", "error", err)
	}
	if !l.clean(linksBefore) {
		return fmt.Errorf("leak check: something of the removed sandboxes is left (%+v)", l)
	}
	fmt.Fprintf(out, "  %-12s nothing left\n", "result")
	return nil
}

func (d *densityRun) runscRoot() string { return filepath.Join(d.dc.StateDir, "runsc") }

func (d *densityRun) findLeftovers(ctx context.Context) leftovers {
	var l leftovers
	ours := map[string]bool{}
	for _, id := range d.ids {
		ours[id] = true
	}
	listed, err := runscList(ctx, d.cfg.RunscPath, d.runscRoot())
	l.errs = append(l.errs, err)
	l.runscTotal = len(listed)
	for _, id := range listed {
		if ours[id] {
			l.runsc++
		}
	}
	l.links, err = countLinks(d.dc.LinkPrefix)
	l.errs = append(l.errs, err)
	for _, id := range d.ids {
		for _, p := range []string{
			filepath.Join(d.dc.StateDir, "sandboxes", id),
			filepath.Join(d.dc.StateDir, "net", "netns", id),
			filepath.Join(d.dc.StateDir, "net", "slots", id+".json"),
		} {
			if _, err := os.Lstat(p); err == nil {
				l.dirs++
			}
		}
		if ok, err := cgroups.Exists(d.dc.CgroupParent + "/" + id); err != nil {
			l.errs = append(l.errs, err)
		} else if ok {
			l.cgroups++
		}
	}
	l.mounts, err = countNaming("/proc/self/mountinfo", d.ids, mountPoints)
	l.errs = append(l.errs, err)
	l.procs, err = countProcsNaming(d.ids)
	l.errs = append(l.errs, err)
	l.errs = compact(l.errs)
	return l
}

// compact drops the nil errors.
func compact(errs []error) []error {
	var out []error
	for _, e := range errs {
		if e != nil {
			out = append(out, e)
		}
	}
	return out
}

// runscList returns the container ids runsc lists under root.
func runscList(ctx context.Context, runsc, root string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, runsc, "--root", root, "list", "--format", "json")
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("runsc list: %s: %w", strings.TrimSpace(stderr.String()), err)
	}
	var states []struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(b, &states); err != nil {
		return nil, fmt.Errorf("runsc list: %w", err)
	}
	ids := make([]string, 0, len(states))
	for _, s := range states {
		ids = append(ids, s.ID)
	}
	return ids, nil
}

// mountPoints returns the mount point of each mountinfo line.
func mountPoints(b []byte) []string {
	var mps []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 {
			mps = append(mps, mountinfo.Unescape(f[4]))
		}
	}
	return mps
}

// countNaming counts the entries split out of file that contain one of ids.
func countNaming(file string, ids []string, split func([]byte) []string) (int, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range split(b) {
		if namesAny(e, ids) {
			n++
		}
	}
	return n, nil
}

// countProcsNaming counts the host's processes whose command line contains
// one of ids (a runsc sandbox or gofer names its container and bundle).
func countProcsNaming(ids []string) (int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(b) == 0 {
			continue // gone, or a kernel thread
		}
		if namesAny(string(b), ids) {
			n++
		}
	}
	return n, nil
}

func namesAny(s string, ids []string) bool {
	for _, id := range ids {
		if strings.Contains(s, id) {
			return true
		}
	}
	return false
}
