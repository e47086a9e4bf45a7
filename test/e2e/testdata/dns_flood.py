# The flood of TestDecisionFlood, run inside a sandbox: DNS queries for
# made-up names under flood.test at the sandbox's resolver, as fast as it
# answers, for argv[1] seconds, with one real TCP connection attempt to
# argv[2]:80 in the middle. Prints JSON: queries sent, answers by rcode.
import json, random, socket, struct, sys, time

secs, real = float(sys.argv[1]), sys.argv[2]
resolver = [l.split()[1] for l in open("/etc/resolv.conf") if l.startswith("nameserver")][0]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(0.5)
sent, rcodes, i, real_done = 0, {}, 0, False
end = time.time() + secs
while time.time() < end:
    i += 1
    qid = random.randrange(65536)
    name = b"".join(bytes([len(p)]) + p for p in (b"q%d" % i, b"flood", b"test")) + b"\0"
    s.sendto(struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0) + name + struct.pack(">HH", 1, 1), (resolver, 53))
    sent += 1
    try:
        while True:
            data = s.recv(4096)
            if struct.unpack(">H", data[:2])[0] == qid:
                rc = data[3] & 0x0F
                rcodes[rc] = rcodes.get(rc, 0) + 1
                break
    except socket.timeout:
        rcodes["timeout"] = rcodes.get("timeout", 0) + 1
    if not real_done and time.time() > end - secs / 2:
        real_done = True
        c = socket.socket()
        c.settimeout(2)
        try:
            c.connect((real, 80))
        except OSError:
            pass
        c.close()
print(json.dumps({"sent": sent, "rcodes": {str(k): v for k, v in rcodes.items()}}))
