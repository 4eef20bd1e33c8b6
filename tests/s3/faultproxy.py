#!/usr/bin/env python3
"""A fault-injecting HTTP/1.1 proxy between tierfs and an S3 server, for the
tests: it forwards each request on a kept-alive connection of its own to the
server, and to a configurable share of them instead

  --error R     answers 503 ServiceUnavailable (S3 error XML), body unread
                by the server (the request never reaches it)
  --slowdown R  answers 503 SlowDown, as S3 does when a prefix is too hot
  --throttle R  answers 429 (SlowDown's code with the status some S3
                servers use)
  --delay R     waits --delay-ms before forwarding (a slow server)
  --cut R       forwards, then closes the client's connection half way
                through the response (a reset connection mid-body)
  --drop R      closes the client's connection before forwarding anything

Each R is a share between 0 and 1, drawn per request with --seed. The
shares can be changed while it runs: GET /__set?error=0.2&cut=0 (any of the
names above, delay_ms too), answered by the proxy itself. Its counters
(requests, forwarded, errors_503, slowdowns, throttles, delays, cuts, drops,
by method too: PUT, GET, ...) are rewritten as KEY=VALUE lines in
--stats-file after every request, and served at GET /__stats.

Requests carry Content-Length bodies or chunked ones; responses are relayed
by Content-Length, chunked encoding or close. The Host header is passed
through unchanged, so SigV4 signatures (which cover it) still verify.
"""
import argparse
import os
import random
import socket
import sys
import threading
import time
import urllib.parse

FAULTS = ("error", "slowdown", "throttle", "delay", "cut", "drop")


class State:
    def __init__(self, args):
        self.lock = threading.Lock()
        self.rates = {f: getattr(args, f) for f in FAULTS}
        self.delay_ms = args.delay_ms
        self.rng = random.Random(args.seed)
        self.stats = {k: 0 for k in ("connections", "requests", "forwarded", "errors_503", "slowdowns",
                                     "throttles", "delays", "cuts", "drops", "upstream_errors")}
        self.stats_file = args.stats_file
        self.write_stats()

    def draw(self):
        """One fault for the next request, or None."""
        with self.lock:
            x = self.rng.random()
            for f in FAULTS:
                r = self.rates[f]
                if x < r:
                    return f
                x -= r
            return None

    def count(self, *keys):
        with self.lock:
            for k in keys:
                self.stats[k] = self.stats.get(k, 0) + 1
            self.write_stats()

    def text(self):
        with self.lock:
            lines = ["%s=%d" % kv for kv in sorted(self.stats.items())]
            lines += ["rate_%s=%g" % (f, self.rates[f]) for f in FAULTS]
            lines.append("delay_ms=%d" % self.delay_ms)
            return "\n".join(lines) + "\n"

    def write_stats(self):  # called with the lock held
        if not self.stats_file:
            return
        lines = ["%s=%d" % kv for kv in sorted(self.stats.items())]
        tmp = self.stats_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("\n".join(lines) + "\n")
        os.replace(tmp, self.stats_file)


class Closed(Exception):
    pass


class Reader:
    """Buffered reads of lines and exact byte counts from a socket."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""

    def fill(self):
        d = self.sock.recv(1 << 16)
        if not d:
            raise Closed()
        self.buf += d

    def line(self):
        while b"\r\n" not in self.buf:
            if len(self.buf) > 1 << 16:
                raise Closed()
            self.fill()
        i = self.buf.index(b"\r\n") + 2
        out, self.buf = self.buf[:i], self.buf[i:]
        return out

    def exact(self, n):
        while len(self.buf) < n:
            self.fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def rest(self):
        out = self.buf
        self.buf = b""
        while True:
            try:
                d = self.sock.recv(1 << 16)
            except OSError:
                break
            if not d:
                break
            out += d
        return out


def read_head(r):
    """Start line and headers (as bytes, raw) and a dict of lower-cased names."""
    first = r.line()
    while first == b"\r\n":  # stray empty lines between requests
        first = r.line()
    raw = [first]
    hdrs = {}
    while True:
        ln = r.line()
        raw.append(ln)
        if ln == b"\r\n":
            break
        k, _, v = ln.decode("latin-1").partition(":")
        hdrs[k.strip().lower()] = v.strip()
    return first, b"".join(raw), hdrs


def read_body(r, hdrs):
    """The message body as it came on the wire (chunked bodies stay chunked)."""
    if hdrs.get("transfer-encoding", "").lower() == "chunked":
        out = []
        while True:
            sz = r.line()
            out.append(sz)
            n = int(sz.split(b";")[0].strip(), 16)
            if n == 0:
                while True:  # trailers, up to the empty line
                    t = r.line()
                    out.append(t)
                    if t == b"\r\n":
                        return b"".join(out)
            out.append(r.exact(n + 2))
    n = int(hdrs.get("content-length", "0") or 0)
    return r.exact(n) if n else b""


def error_reply(status, code, msg, extra=b""):
    body = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>%s</Code><Message>%s</Message>"
            "<RequestId>faultproxy</RequestId></Error>" % (code, msg)).encode()
    reason = {503: "Service Unavailable", 429: "Too Many Requests"}[status]
    return (b"HTTP/1.1 %d %s\r\nContent-Type: application/xml\r\nContent-Length: %d\r\n%s\r\n"
            % (status, reason.encode(), len(body), extra)) + body


class Conn(threading.Thread):
    def __init__(self, st, csock, upstream):
        super().__init__(daemon=True)
        self.st, self.c, self.upstream = st, csock, upstream
        self.u = None
        self.ur = None

    def up(self):
        if self.u is None:
            self.u = socket.create_connection(self.upstream, timeout=120)
            self.u.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.ur = Reader(self.u)
        return self.u

    def drop_up(self):
        if self.u is not None:
            try:
                self.u.close()
            except OSError:
                pass
        self.u = self.ur = None

    def control(self, path):
        q = urllib.parse.urlparse(path)
        if q.path == "/__set":
            with self.st.lock:
                for k, v in urllib.parse.parse_qsl(q.query):
                    if k in self.st.rates:
                        self.st.rates[k] = float(v)
                    elif k == "delay_ms":
                        self.st.delay_ms = int(v)
        body = self.st.text().encode()
        self.c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s"
                       % (len(body), body))

    def run(self):
        self.st.count("connections")
        self.c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        r = Reader(self.c)
        try:
            while True:
                self.one(r)
        except (Closed, OSError, ValueError):
            pass
        finally:
            self.drop_up()
            try:
                self.c.close()
            except OSError:
                pass

    def one(self, r):
        first, head, hdrs = read_head(r)
        parts = first.decode("latin-1").split()
        method, path = parts[0], parts[1]
        if path.startswith("/__"):
            read_body(r, hdrs)
            self.control(path)
            return
        fault = self.st.draw()
        self.st.count("requests", "method_" + method)
        if fault == "drop":
            self.st.count("drops")
            self.c.shutdown(socket.SHUT_RDWR)
            raise Closed()
        if hdrs.get("expect", "").lower() == "100-continue":
            # answer for the server, which then sends a 100 of its own that
            # is dropped below: the body must be here before a fault is given
            self.c.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
        body = read_body(r, hdrs)
        if fault == "error":
            self.st.count("errors_503")
            self.c.sendall(error_reply(503, "ServiceUnavailable", "injected by faultproxy"))
            return
        if fault == "slowdown":
            self.st.count("slowdowns")
            self.c.sendall(error_reply(503, "SlowDown", "Please reduce your request rate."))
            return
        if fault == "throttle":
            self.st.count("throttles")
            self.c.sendall(error_reply(429, "SlowDown", "Please reduce your request rate.",
                                       b"Retry-After: 0\r\n"))
            return
        if fault == "delay":
            self.st.count("delays")
            time.sleep(self.st.delay_ms / 1000.0)
        # forward, once more on a fresh connection if the kept one was closed
        for attempt in (0, 1):
            try:
                self.up().sendall(head + body)
                rfirst, rhead, rh = read_head(self.ur)
                while int(rfirst.split()[1]) == 100:
                    rfirst, rhead, rh = read_head(self.ur)
                break
            except (Closed, OSError):
                self.drop_up()
                if attempt:
                    self.st.count("upstream_errors")
                    self.c.sendall(error_reply(503, "ServiceUnavailable", "faultproxy: server unreachable",
                                               b"Connection: close\r\n"))
                    raise Closed()
        status = int(rfirst.split()[1])
        if method == "HEAD" or status in (204, 304):
            rbody = b""
        elif "content-length" in rh or rh.get("transfer-encoding", "").lower() == "chunked":
            rbody = read_body(self.ur, rh)
        else:
            rbody = self.ur.rest()
            self.drop_up()
        if rh.get("connection", "").lower() == "close":
            self.drop_up()
        self.st.count("forwarded")
        if fault == "cut":
            self.st.count("cuts")
            msg = rhead + rbody
            self.c.sendall(msg[:max(1, len(rhead) + len(rbody) // 2)] if rbody else msg[:len(msg) // 2])
            # a reset, not an orderly end: the client must see the loss
            self.c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            raise Closed()
        self.c.sendall(rhead + rbody)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--upstream", required=True, help="HOST:PORT of the S3 server")
    ap.add_argument("--port", type=int, default=0, help="port to listen on, 127.0.0.1 (0: any free)")
    ap.add_argument("--port-file", help="write the port listened on here, once listening")
    ap.add_argument("--stats-file", help="counters as KEY=VALUE lines, rewritten after each request")
    for f in FAULTS:
        ap.add_argument("--" + f, type=float, default=0.0, metavar="R")
    ap.add_argument("--delay-ms", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if sum(getattr(args, f) for f in FAULTS) > 1:
        ap.error("the shares add up to more than 1")
    host, _, port = args.upstream.rpartition(":")
    st = State(args)
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", args.port))
    ls.listen(128)
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % ls.getsockname()[1])
        os.replace(tmp, args.port_file)
    print("faultproxy: 127.0.0.1:%d -> %s" % (ls.getsockname()[1], args.upstream), file=sys.stderr, flush=True)
    while True:
        c, _ = ls.accept()
        Conn(st, c, (host, int(port))).start()


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        pass
