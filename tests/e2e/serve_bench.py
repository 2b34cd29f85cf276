#!/usr/bin/env python3
"""Serving benchmark for `memra serve` (standard library only; meant for the GPU machine).

Starts the server, then for each concurrency level runs that many clients, each streaming
completions of a fixed-length prompt (random token ids, distinct per request) and a fixed-length
answer (ignore_eos, greedy). Reports output throughput from the client and mean time-to-first-token
and time-per-output-token from the server's /metrics histograms (deltas over the level).

  tests/e2e/serve_bench.py --memra build-gpu/memra --model /tmp/memra-gpu/qwen35-9b-q4_0.gguf \\
      --device cuda --concurrency 1,8,32,64 --prompt-tokens 512 --max-tokens 256 --out bench/results
"""
import argparse
import datetime
import http.client
import json
import os
import random
import re
import subprocess
import sys
import threading
import time
import urllib.parse


def metrics(host, port):
    conn = http.client.HTTPConnection(host, port, timeout=60)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    vals = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, v = line.rpartition(" ")
            vals[name] = float(v)
    return vals


def stream_completion(host, port, body):
    """Returns completion tokens (from usage), or raises."""
    conn = http.client.HTTPConnection(host, port, timeout=3600)
    try:
        conn.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            raise RuntimeError(f"HTTP {resp.status}: {resp.read()[:300]!r}")
        usage = None
        for raw in resp:
            line = raw.decode("utf-8").strip()
            if line == "data: [DONE]":
                break
            if line.startswith("data: "):
                j = json.loads(line[6:])
                if "error" in j:
                    raise RuntimeError(j["error"]["message"])
                if j.get("usage"):
                    usage = j["usage"]["completion_tokens"]
        if usage is None:
            raise RuntimeError("stream ended without usage")
        return usage
    finally:
        conn.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--memra", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--concurrency", default="1,8,32,64")
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--requests-per-client", type=int, default=2)
    ap.add_argument("--out", default="bench/results", help="directory for <stamp>-serve.md / .jsonl ('' for none)")
    args = ap.parse_args()
    levels = [int(x) for x in args.concurrency.split(",")]
    ctx = args.prompt_tokens + args.max_tokens + 16

    proc = subprocess.Popen([args.memra, "serve", "-m", args.model, "--device", args.device, "--port", "0",
                             "--ctx", str(ctx), "--max-batch", str(max(levels)), "--max-queue", str(4 * max(levels))],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url, banner = None, []
    for line in proc.stdout:
        banner.append(line.rstrip())
        m = re.search(r"listening on (http://\S+)", line)
        if m:
            url = m.group(1)
            break
    if not url:
        sys.exit("serve bench: the server did not start:\n" + "\n".join(banner))
    threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()
    u = urllib.parse.urlparse(url)
    host, port = u.hostname, u.port
    n_vocab_guess = 1000  # token ids below every real vocabulary's size
    rng = random.Random(1)

    def body():
        return {"prompt": [rng.randrange(10, n_vocab_guess) for _ in range(args.prompt_tokens)],
                "max_tokens": args.max_tokens, "temperature": 0, "ignore_eos": True, "stream": True,
                "stream_options": {"include_usage": True}}

    stream_completion(host, port, dict(body(), max_tokens=8))  # warm-up (first-use allocations, graphs)
    rows = []
    for c in levels:
        bodies = [body() for _ in range(c * args.requests_per_client)]
        before = metrics(host, port)
        tokens, errors, lock = [0], [], threading.Lock()

        def client(k):
            for i in range(k, len(bodies), c):
                try:
                    n = stream_completion(host, port, bodies[i])
                    with lock:
                        tokens[0] += n
                except Exception as e:  # noqa: BLE001 - reported, fails the run
                    with lock:
                        errors.append(str(e))

        t0 = time.monotonic()
        threads = [threading.Thread(target=client, args=(k,)) for k in range(c)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.monotonic() - t0
        after = metrics(host, port)

        def mean_ms(h):
            n = after.get(h + "_count", 0) - before.get(h + "_count", 0)
            s = after.get(h + "_sum", 0) - before.get(h + "_sum", 0)
            return s / n * 1000 if n else float("nan")

        row = {"concurrency": c, "requests": len(bodies), "prompt_tokens": args.prompt_tokens,
               "max_tokens": args.max_tokens, "output_tokens": tokens[0], "wall_s": round(wall, 3),
               "output_tok_s": round(tokens[0] / wall, 1),
               "ttft_ms": round(mean_ms("memra_time_to_first_token_seconds"), 1),
               "tpot_ms": round(mean_ms("memra_time_per_output_token_seconds"), 2), "errors": len(errors)}
        rows.append(row)
        print(json.dumps(row), flush=True)
        for e in errors[:5]:
            print("  error: " + e)

    proc.terminate()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()

    md = [f"# memra serve benchmark ({os.path.basename(args.model)}, {args.device})", "",
          f"prompt {args.prompt_tokens} tokens, answer {args.max_tokens} tokens (greedy, ignore_eos), "
          f"{args.requests_per_client} requests per client; TTFT/TPOT: server-side means", "",
          "| concurrency | requests | output tok/s | TTFT ms | TPOT ms | errors |", "|---|---|---|---|---|---|"]
    for r in rows:
        md.append(f"| {r['concurrency']} | {r['requests']} | {r['output_tok_s']} | {r['ttft_ms']} | {r['tpot_ms']} | "
                  f"{r['errors']} |")
    print("\n".join(md))
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d-%H%M")
        with open(os.path.join(args.out, f"{stamp}-serve.md"), "w") as f:
            f.write("\n".join(banner + [""] + md) + "\n")
        with open(os.path.join(args.out, f"{stamp}-serve.jsonl"), "a") as f:
            for r in rows:
                f.write(json.dumps(dict(r, model=os.path.basename(args.model), device=args.device)) + "\n")
    return 1 if any(r["errors"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
