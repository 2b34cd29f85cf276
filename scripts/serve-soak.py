#!/usr/bin/env python3
"""Soak `memra serve` with hostile clients and write the numbers to bench/results/.

  scripts/serve-soak.py [--memra build-cpu/memra] [--slow 1000] [--idle 1000] [--big 100]

Starts the server (the embedded demo model unless --model), then measures:
  1. /health latency and RSS at rest;
  2. /health latency while --slow slowloris sockets (one header byte per second, reconnected when
     the server drops them) and --idle idle keep-alive connections are open, and a streamed
     completion meanwhile (time to [DONE]);
  3. RSS after --big rejected 7 MB chat requests (the target: within 50 MB of the baseline);
  4. the hostile corpus: each request's status and the RSS after it.
Standard library only. Writes bench/results/YYYY-MM-DD-HHMM-serve-soak.md (or --out).
"""
import argparse
import datetime
import http.client
import json
import os
import resource
import socket
import subprocess
import sys
import threading
import time
import zlib


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def health_ms(port, timeout=30.0):
    t0 = time.monotonic()
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        c.request("GET", "/health")
        r = c.getresponse()
        r.read()
        c.close()
        ok = r.status == 200
    except OSError:
        ok = False
    return (time.monotonic() - t0) * 1000.0, ok


def health_stats(port, n=20, timeout=30.0):
    xs, fails = [], 0
    for _ in range(n):
        ms, ok = health_ms(port, timeout)
        xs.append(ms)
        fails += 0 if ok else 1
    xs.sort()
    return {"p50_ms": round(xs[len(xs) // 2], 1), "max_ms": round(xs[-1], 1), "failed": fails}


def raw(port, data, read_timeout=10.0):
    """Sends raw bytes, returns (status line, seconds)."""
    t0 = time.monotonic()
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(read_timeout)
    status = "no answer"
    try:
        if callable(data):
            data(s)
        else:
            s.sendall(data)
        buf = b""
        while b"\r\n" not in buf:
            chunk = s.recv(4096)
            if not chunk:
                break
            buf += chunk
        if buf:
            status = buf.split(b"\r\n", 1)[0].decode(errors="replace")
    except OSError as e:
        status = f"{type(e).__name__}"
    finally:
        s.close()
    return status, time.monotonic() - t0


class Slowloris:
    """N sockets each sending one header byte per second; reconnects the ones the server drops."""

    def __init__(self, port, n):
        self.port, self.n, self.stop = port, n, False
        self.socks = []
        self.reconnects = 0
        self.head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nX-Pad: " + b"a" * 100000

    def open_one(self):
        s = socket.create_connection(("127.0.0.1", self.port))
        s.setblocking(False)
        return [s, 0]

    def start(self):
        for _ in range(self.n):
            self.socks.append(self.open_one())
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while not self.stop:
            for entry in self.socks:
                s, at = entry
                try:
                    s.send(self.head[at:at + 1])
                    entry[1] = at + 1
                except OSError:
                    s.close()
                    try:
                        entry[0], entry[1] = self.open_one()
                        self.reconnects += 1
                    except OSError:
                        pass
            time.sleep(1.0)

    def close(self):
        self.stop = True
        self.t.join()
        for s, _ in self.socks:
            s.close()


def open_idle(port, n):
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")
        s.settimeout(30)
        buf = b""
        while b"\r\n\r\n" not in buf:
            buf += s.recv(4096)
        socks.append(s)
    return socks


def stream_seconds(port):
    body = json.dumps({"messages": [{"role": "user", "content": "Tell me a story"}], "max_tokens": 64,
                       "temperature": 0, "ignore_eos": True, "stream": True})
    t0 = time.monotonic()
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        c.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
        r = c.getresponse()
        text = r.read().decode(errors="replace")
        c.close()
        done = r.status == 200 and "data: [DONE]" in text
    except OSError:
        done = False
    return round(time.monotonic() - t0, 2), done


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--memra", default="build-cpu/memra")
    ap.add_argument("--model", default="")
    ap.add_argument("--slow", type=int, default=1000)
    ap.add_argument("--idle", type=int, default=1000)
    ap.add_argument("--big", type=int, default=100)
    ap.add_argument("--label", default="")
    ap.add_argument("--out", default="")
    a = ap.parse_args()

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    port = free_port()
    cmd = [a.memra, "serve", "--port", str(port)] + (["-m", a.model] if a.model else [])
    srv = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    lines = []
    try:
        for _ in range(600):
            if health_ms(port, 1.0)[1]:
                break
            time.sleep(0.1)
        base_rss = rss_mb(srv.pid)
        rest = health_stats(port)
        rest_secs, rest_done = stream_seconds(port)
        lines.append(f"- at rest: /health p50 {rest['p50_ms']} ms, max {rest['max_ms']} ms; a 64-token stream took "
                     f"{rest_secs} s (completed: {rest_done}); RSS {base_rss:.0f} MB")

        slow = Slowloris(port, a.slow)
        slow.start()
        idle = open_idle(port, a.idle)
        time.sleep(2.0)
        under = health_stats(port, n=10)
        secs, done = stream_seconds(port)
        lines.append(f"- with {a.slow} slowloris + {len(idle)} idle keep-alive sockets open: /health p50 "
                     f"{under['p50_ms']} ms, max {under['max_ms']} ms, failed {under['failed']}/10; a 64-token "
                     f"stream took {secs} s (completed: {done}); slowloris reconnects so far {slow.reconnects}")
        slow.close()
        for s in idle:
            s.close()

        big = json.dumps({"messages": [{"role": "user", "content": "a" * (7 << 20)}]}).encode()
        statuses = {}
        for i in range(a.big):
            st, _ = raw(port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json"
                        b"\r\nContent-Length: " + str(len(big)).encode() + b"\r\n\r\n" + big, 60)
            statuses[st] = statuses.get(st, 0) + 1
        time.sleep(1.0)
        after = rss_mb(srv.pid)
        lines.append(f"- {a.big} rejected 7 MB chat requests ({statuses}): RSS {base_rss:.0f} -> {after:.0f} MB "
                     f"(+{after - base_rss:.0f} MB; target < 50)")

        def chunked_huge(s):
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                      b"Transfer-Encoding: chunked\r\n\r\n")
            chunk = b"%x\r\n" % (1 << 20) + b"a" * (1 << 20) + b"\r\n"
            for _ in range(256):
                try:
                    s.sendall(chunk)
                except OSError:
                    break

        bomb = zlib.compress(b"a" * (512 << 20), 9)
        corpus = [
            ("chunked 256 MB body", chunked_huge),
            ("gzip bomb (%d KB -> 512 MB)" % (len(bomb) // 1024),
             b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
             b"Content-Encoding: deflate\r\nContent-Length: " + str(len(bomb)).encode() + b"\r\n\r\n" + bomb),
            ("POST without length", b"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json"
             b"\r\n\r\n{\"prompt\": \"x\"}"),
            ("1,000,000 headers", b"GET /health HTTP/1.1\r\nHost: localhost\r\n" + b"X: y\r\n" * 1000000 + b"\r\n"),
            ("CL + TE", b"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
             b"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
            ("Range on /v1/models", b"GET /v1/models HTTP/1.1\r\nHost: localhost\r\nRange: bytes=0-3\r\n\r\n"),
            ("text/plain body", b"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: text/plain\r\n"
             b"Content-Length: 15\r\n\r\n{\"prompt\": \"x\"}"),
            ("Host: evil.example", b"GET /v1/models HTTP/1.1\r\nHost: evil.example\r\n\r\n"),
        ]
        for name, data in corpus:
            st, secs = raw(port, data, 30)
            lines.append(f"- {name}: `{st}` in {secs:.2f} s; RSS {rss_mb(srv.pid):.0f} MB")
        lines.append(f"- server still healthy: {health_ms(port, 5)[1]}")
    finally:
        srv.terminate()
        try:
            srv.wait(15)
        except subprocess.TimeoutExpired:
            srv.kill()

    stamp = datetime.datetime.now().strftime("%Y-%m-%d-%H%M")
    out = a.out or os.path.join("bench", "results", f"{stamp}-serve-soak.md")
    head = [f"# serve soak {stamp}{' (' + a.label + ')' if a.label else ''}", "",
            f"`{' '.join(sys.argv)}` on {os.cpu_count()} cores; server: `{' '.join(cmd)}`", ""]
    text = "\n".join(head + lines) + "\n"
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "a") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
