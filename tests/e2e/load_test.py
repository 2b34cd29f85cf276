#!/usr/bin/env python3
"""Load test for `memra serve` on loopback (run by hand; standard library only).

64 concurrent clients (default) stream requests for N seconds. Every streamed answer is compared
with the non-streamed answer to the same request (same seed), computed once up front: the text and
the sequence of tokens (from logprobs) must be identical, so a lost, duplicated or reordered token
fails the run. The server's resident memory is reported at start, after warm-up and at the end.

  tests/e2e/load_test.py --memra build/memra --seconds 60          # starts its own server
  tests/e2e/load_test.py --url http://127.0.0.1:8080 --pid PID     # an already running one

Exit status: 0 when every stream matched and no request failed.
"""
import argparse
import http.client
import json
import os
import random
import re
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse


def rss_mib(pid):
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


class Server:
    def __init__(self, url):
        u = urllib.parse.urlparse(url)
        self.host, self.port = u.hostname, u.port

    def post(self, path, body, stream):
        """Returns (status, final text, token list, finish reason, completion tokens, ttft seconds)."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=300)
        t0 = time.monotonic()
        try:
            conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
            resp = conn.getresponse()
            if resp.status != 200:
                return resp.status, resp.read().decode("utf-8", "replace"), None, None, None, None
            chat = path.endswith("chat/completions")
            if not stream:
                j = json.loads(resp.read())
                c = j["choices"][0]
                text = c["message"]["content"] if chat else c["text"]
                lp = c.get("logprobs")
                tokens = None
                if lp:
                    tokens = [e["token"] for e in lp["content"]] if chat else lp["tokens"]
                return 200, text or "", tokens, c["finish_reason"], j["usage"]["completion_tokens"], None
            text, tokens, finish, usage, ttft, done = [], [], None, None, None, False
            for raw in resp:
                line = raw.decode("utf-8").rstrip("\r\n")
                if not line.startswith("data: "):
                    continue
                payload = line[6:]
                if payload == "[DONE]":
                    done = True
                    break
                j = json.loads(payload)
                if "error" in j:
                    return 599, j["error"]["message"], None, None, None, None
                if j.get("usage"):
                    usage = j["usage"]["completion_tokens"]
                for c in j["choices"]:
                    piece = (c["delta"].get("content") or "") if chat else c["text"]
                    if piece and ttft is None:
                        ttft = time.monotonic() - t0
                    text.append(piece)
                    lp = c.get("logprobs")
                    if lp:
                        tokens += [e["token"] for e in lp["content"]] if chat else lp["tokens"]
                    if c.get("finish_reason"):
                        finish = c["finish_reason"]
            if not done:
                return 598, "stream ended without [DONE]", None, None, None, None
            return 200, "".join(text), tokens or None, finish, usage, ttft
        except (OSError, http.client.HTTPException) as e:
            return -1, str(e), None, None, None, None
        finally:
            conn.close()


def server_summary(server):
    conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
    try:
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
    except (OSError, http.client.HTTPException) as e:
        return f"/metrics unavailable ({e})"
    finally:
        conn.close()
    vals = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, v = line.rpartition(" ")
            vals[name] = float(v)
    out = []
    for h, label in (("memra_time_to_first_token_seconds", "TTFT"), ("memra_time_per_output_token_seconds", "TPOT")):
        n = vals.get(h + "_count", 0)
        if n:
            out.append(f"{label} mean {vals[h + '_sum'] / n * 1000:.1f} ms over {int(n)}")
    out.append(f"generated {int(vals.get('memra_generation_tokens_total', 0))} tokens")
    return ", ".join(out)


def make_requests(n, seed):
    rng = random.Random(seed)
    words = "alpha beta gamma delta tensor kernel batch stream token model layer cache".split()
    reqs = []
    for i in range(n):
        prompt = " ".join(rng.choice(words) for _ in range(rng.randint(2, 60)))
        body = {"max_tokens": rng.randint(8, 48), "temperature": rng.choice([0, 0.7, 1.0]), "seed": 1000 + i,
                "ignore_eos": rng.random() < 0.7}
        if i % 2 == 0:
            path = "/v1/chat/completions"
            body["messages"] = [{"role": "user", "content": prompt}]
            if i % 4 == 0:
                body["logprobs"], body["top_logprobs"] = True, 2
        else:
            path = "/v1/completions"
            body["prompt"] = prompt
            if i % 4 == 1:
                body["logprobs"] = 1
        reqs.append((path, body))
    return reqs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", help="base URL of a running server (http://host:port)")
    ap.add_argument("--pid", type=int, help="its process id, for memory figures")
    ap.add_argument("--memra", help="start this memra binary instead")
    ap.add_argument("--model", default=os.path.join(os.environ.get("MEMRA_FIXTURES_DIR", "../shared/fixtures"),
                                                    "qwen35-tiny.f32.gguf"))
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--requests", type=int, default=48, help="distinct requests (each checked against its reference)")
    ap.add_argument("--max-batch", type=int, default=16)
    ap.add_argument("--max-queue", type=int, default=64)
    args = ap.parse_args()

    proc = None
    if args.memra:
        proc = subprocess.Popen([args.memra, "serve", "-m", args.model, "--device", "cpu", "--port", "0", "--ctx", "1024",
                                 "--max-batch", str(args.max_batch), "--max-queue", str(args.max_queue)],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for line in proc.stdout:
            m = re.search(r"listening on (http://\S+)", line)
            if m:
                args.url, args.pid = m.group(1), proc.pid
                break
        if not args.url:
            sys.exit("load test: the server did not start")
        threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()
    if not args.url:
        sys.exit("load test: give --url or --memra")

    server = Server(args.url)
    reqs = make_requests(args.requests, 7)
    rss_start = rss_mib(args.pid)
    print(f"load test: {args.url}, {args.clients} clients, {args.seconds:.0f} s, {len(reqs)} distinct requests")
    refs = []
    for path, body in reqs:
        st, text, tokens, finish, ntok, _ = server.post(path, body, stream=False)
        if st != 200:
            sys.exit(f"load test: reference request failed: HTTP {st}: {text}")
        refs.append((text, tokens, finish, ntok))

    lock = threading.Lock()
    stats = {"ok": 0, "mismatch": 0, "failed": 0, "tokens": 0}
    failures, ttfts = [], []
    deadline = time.monotonic() + args.seconds
    warm_at = time.monotonic() + args.seconds * 0.2
    rss_warm = [None]

    def client(k):
        rng = random.Random(k)
        while time.monotonic() < deadline:
            i = rng.randrange(len(reqs))
            path, body = reqs[i]
            sbody = dict(body, stream=True, stream_options={"include_usage": True})
            st, text, tokens, finish, ntok, ttft = server.post(path, sbody, stream=True)
            with lock:
                if st != 200:
                    stats["failed"] += 1
                    failures.append(f"request {i}: HTTP {st}: {text[:200]}")
                    continue
                rt, rtok, rfin, rn = refs[i]
                if (text, tokens, finish, ntok) != (rt, rtok, rfin, rn):
                    stats["mismatch"] += 1
                    failures.append(f"request {i}: streamed answer differs from the reference "
                                    f"(finish {finish} vs {rfin}, tokens {ntok} vs {rn})")
                else:
                    stats["ok"] += 1
                    stats["tokens"] += ntok
                    if ttft is not None:
                        ttfts.append(ttft)

    samples = []

    def sampler():
        while time.monotonic() < warm_at:
            time.sleep(0.1)
        rss_warm[0] = rss_mib(args.pid)
        while time.monotonic() < deadline:
            time.sleep(min(5.0, max(0.0, deadline - time.monotonic())))
            samples.append(rss_mib(args.pid))

    threads = [threading.Thread(target=client, args=(k,)) for k in range(args.clients)]
    t0 = time.monotonic()
    threading.Thread(target=sampler, daemon=True).start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - t0
    rss_end = rss_mib(args.pid)

    print(f"completed {stats['ok']} streams ({stats['tokens']} tokens, {stats['tokens'] / elapsed:.1f} tokens/s) "
          f"in {elapsed:.1f} s; mismatched {stats['mismatch']}; failed {stats['failed']}")
    if ttfts:
        q = statistics.quantiles(ttfts, n=20)
        print(f"time to first token: median {statistics.median(ttfts) * 1000:.0f} ms, p95 {q[18] * 1000:.0f} ms")
    fmt = lambda v: "n/a" if v is None else f"{v:.1f} MiB"
    print(f"server RSS: start {fmt(rss_start)}, after warm-up {fmt(rss_warm[0])}, end {fmt(rss_end)}")
    if samples:
        print("server RSS every 5 s after warm-up: " + ", ".join(fmt(v) for v in samples))
    print("server-side: " + server_summary(server))
    for f in failures[:20]:
        print("  " + f)
    if proc:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            print("load test: the server did not exit within 30 s of SIGTERM")
            return 1
    return 0 if stats["mismatch"] == 0 and stats["failed"] == 0 and stats["ok"] > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
