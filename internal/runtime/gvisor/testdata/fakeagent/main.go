// Command fakeagent stands in for the Corral guest agent in the gvisor
// runtime tests. Run as "fakeagent agent --listen unix:PATH", it listens on
// PATH and, for each connection, reads one line, runs it with /bin/sh -c and
// writes back the combined output before closing the connection.
package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
)

func main() {
	if len(os.Args) != 4 || os.Args[1] != "agent" || os.Args[2] != "--listen" || !strings.HasPrefix(os.Args[3], "unix:") {
		fmt.Fprintln(os.Stderr, "usage: fakeagent agent --listen unix:PATH")
		os.Exit(2)
	}
	path := strings.TrimPrefix(os.Args[3], "unix:")
	_ = os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakeagent:", err)
		os.Exit(1)
	}
	fmt.Println("fakeagent listening on", path)
	for {
		c, err := l.Accept()
		if err != nil {
			fmt.Fprintln(os.Stderr, "fakeagent: accept:", err)
			os.Exit(1)
		}
		go serve(c)
	}
}

func serve(c net.Conn) {
	defer c.Close()
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil && line == "" {
		return
	}
	out, err := exec.Command("/bin/sh", "-c", strings.TrimSpace(line)).CombinedOutput()
	c.Write(out)
	if err != nil {
		fmt.Fprintf(c, "fakeagent: %v\n", err)
	}
}
