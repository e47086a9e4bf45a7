# The DNS floods of TestTrailFlood, run inside a sandbox: queries for
# made-up names at the sandbox's resolver for argv[1] seconds.
#   argv[2] "fast": a distinct registrable name each time (r<i>-<rand>.test,
#           so no fold can merge them), waiting for each answer; and one
#           real TCP connection attempt to argv[3]:80 in the middle.
#   argv[2] "slow": names under slow.test (the test's upstream never answers
#           them), sent without waiting, argv[3] a second.
# Prints JSON: queries sent, answers by rcode.
import json, random, select, socket, struct, sys, time

secs, mode = float(sys.argv[1]), sys.argv[2]
resolver = [l.split()[1] for l in open("/etc/resolv.conf") if l.startswith("nameserver")][0]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(0.5)
sent, rcodes, i, real_done = 0, {}, 0, False
tag = "%06x" % random.randrange(1 << 24)

def query(labels):
    qid = random.randrange(65536)
    name = b"".join(bytes([len(p)]) + p for p in labels) + b"\0"
    s.sendto(struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0) + name + struct.pack(">HH", 1, 1), (resolver, 53))
    return qid

def count(data):
    rc = data[3] & 0x0F
    rcodes[rc] = rcodes.get(rc, 0) + 1

end = time.time() + secs
if mode == "fast":
    while time.time() < end:
        i += 1
        qid = query([b"r%d-%s" % (i, tag.encode()), b"test"])
        sent += 1
        try:
            while True:
                data = s.recv(4096)
                if struct.unpack(">H", data[:2])[0] == qid:
                    count(data)
                    break
        except socket.timeout:
            rcodes["timeout"] = rcodes.get("timeout", 0) + 1
        if not real_done and time.time() > end - secs / 2:
            real_done = True
            c = socket.socket()
            c.settimeout(2)
            try:
                c.connect((sys.argv[3], 80))
            except OSError:
                pass
            c.close()
else:
    rate = float(sys.argv[3])
    s.setblocking(False)
    while time.time() < end:
        i += 1
        query([b"s%d-%s" % (i, tag.encode()), b"slow", b"test"])
        sent += 1
        deadline = time.time() + 1 / rate
        while time.time() < deadline:
            r, _, _ = select.select([s], [], [], max(0, deadline - time.time()))
            if r:
                count(s.recv(4096))
    deadline = time.time() + 6
    while time.time() < deadline:
        r, _, _ = select.select([s], [], [], max(0, deadline - time.time()))
        if r:
            count(s.recv(4096))
print(json.dumps({"sent": sent, "rcodes": {str(k): v for k, v in rcodes.items()}}))
