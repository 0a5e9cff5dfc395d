#!/usr/bin/env python3
"""Soak test of a running memra-host: many concurrent seeded completions for a fixed time, a share
of them hung up on mid-stream, every finished answer checked against the same request run alone.

    tests/serving/soak.py --url http://127.0.0.1:PORT --model ALIAS --pid HOST_PID \
        [--duration 600] [--concurrency 64] [--cancel 0.25] [--max-tokens 48] [--json OUT]

Phases: (1) references: each of --prompts (prompt, seed) pairs alone, streamed, seeded sampling
(temperature 0.9, top_p 0.95, ignore_eos, so every answer has --max-tokens tokens); (2) warm-up: --warmup
seconds of the same load, then the baseline: the host's RSS (/proc/PID/status) and
memra_kv_blocks_used; (3) the soak: --concurrency client threads, each looping until --duration is
spent: a random pair, streamed (or, one time in four, a plain JSON answer), a --cancel share of the
streams closed after a random number of chunks; (4) idle: every thread done, KV blocks and RSS read
again once the scheduler is empty. A probe thread GETs /health every second throughout.

Counted as errors: a status other than 200, a connection error, a stream without [DONE] or with an
error event, an answer without usage or with fewer tokens than asked. Counted as mismatches: a
finished answer whose text differs from its reference, a hung-up stream whose text so far is not a
prefix of it. Passes (exit 0) with 0 errors, 0 mismatches, KV back to the baseline (idle, every used
block is the prefix cache's), RSS within
--rss-slack-mb of it, and /health always answering in under --probe-limit-ms. Standard library only
(the GPU image has Python but not the dev packages).
"""
import argparse
import http.client
import json
import random
import re
import sys
import threading
import time
import urllib.parse


def log(msg):
    print(f"[soak {time.strftime('%H:%M:%S')}] {msg}", flush=True)


class Target:
    def __init__(self, url, model):
        u = urllib.parse.urlparse(url)
        self.host, self.port, self.model = u.hostname, u.port or 80, model

    def conn(self, timeout=120):
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def get(self, path, timeout=10):
        c = self.conn(timeout)
        try:
            c.request("GET", path)
            r = c.getresponse()
            return r.status, r.read().decode("utf-8", "replace")
        finally:
            c.close()

    def body(self, pair, max_tokens, stream):
        return {"model": self.model, "prompt": pair["prompt"], "max_tokens": max_tokens, "seed": pair["seed"],
                "temperature": 0.9, "top_p": 0.95, "ignore_eos": True, "stream": stream,
                **({"stream_options": {"include_usage": True}} if stream else {})}

    def complete(self, pair, max_tokens, stream, hang_up_after=None):
        """Returns (outcome, text, tokens): outcome 'ok', 'hung_up' or an error string."""
        c = self.conn()
        try:
            c.request("POST", "/v1/completions", body=json.dumps(self.body(pair, max_tokens, stream)),
                      headers={"Content-Type": "application/json"})
            r = c.getresponse()
            if r.status != 200:
                return f"status {r.status}: {r.read()[:200]!r}", "", 0
            if not stream:
                j = json.loads(r.read())
                text = j["choices"][0]["text"]
                return "ok", text, j.get("usage", {}).get("completion_tokens", -1)
            text, tokens, chunks, done = [], -1, 0, False
            while True:
                line = r.readline()
                if not line:
                    break
                line = line.decode("utf-8").rstrip("\r\n")
                if not line.startswith("data: "):
                    continue
                data = line[6:]
                if data == "[DONE]":
                    done = True
                    break
                j = json.loads(data)
                if "error" in j:
                    return f"error event: {data[:200]}", "".join(text), 0
                for ch in j.get("choices", []):
                    text.append(ch.get("text", ""))
                if j.get("usage"):
                    tokens = j["usage"].get("completion_tokens", -1)
                chunks += 1
                if hang_up_after is not None and chunks >= hang_up_after:
                    c.close()  # the client goes away mid-stream
                    return "hung_up", "".join(text), 0
            if not done:
                return "stream ended without [DONE]", "".join(text), 0
            return "ok", "".join(text), tokens
        except Exception as e:  # noqa: BLE001 - every failure is counted, not raised
            return f"{type(e).__name__}: {e}", "", 0
        finally:
            c.close()


def metric(text, name):
    total, seen = 0.0, False
    for line in text.splitlines():
        if re.match(rf"^{name}(\{{| )", line):
            total += float(line.rsplit(" ", 1)[1])
            seen = True
    return total if seen else None


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return None


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.requests = self.finished = self.hung_up = self.tokens = 0
        self.errors, self.mismatches = [], []

    def add(self, outcome, pair, text, tokens, ref, max_tokens):
        with self.lock:
            self.requests += 1
            if outcome == "hung_up":
                self.hung_up += 1
                if not ref.startswith(text):
                    self.mismatches.append({"pair": pair["id"], "hung_up": True, "got": text[:120]})
            elif outcome != "ok":
                self.errors.append({"pair": pair["id"], "error": outcome})
            elif tokens != max_tokens:
                self.errors.append({"pair": pair["id"], "error": f"{tokens} completion tokens, asked {max_tokens}"})
            else:
                self.finished += 1
                self.tokens += tokens
                if text != ref:
                    self.mismatches.append({"pair": pair["id"], "got": text[:120], "want": ref[:120]})


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--pid", type=int, required=True, help="memra-host's process id (for its RSS)")
    ap.add_argument("--duration", type=float, default=600)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--cancel", type=float, default=0.25, help="share of streams hung up on mid-stream")
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--prompts", type=int, default=48, help="distinct (prompt, seed) pairs")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--warmup", type=float, default=60,
                    help="seconds of the same load before the baseline (thread arenas, step buffers and graphs "
                         "for every batch size settle first)")
    ap.add_argument("--rss-slack-mb", type=float, default=64)
    ap.add_argument("--probe-limit-ms", type=float, default=1000)
    ap.add_argument("--json", help="write the summary here")
    a = ap.parse_args()
    t = Target(a.url, a.model)

    for _ in range(600):
        try:
            if t.get("/ready")[0] == 200:
                break
        except OSError:
            pass
        time.sleep(1)
    else:
        log("the host never became ready")
        return 2

    rng = random.Random(a.seed)
    words = "river stone lantern quiet harbor ledger winter copper signal meadow orbit velvet".split()
    pairs = [{"id": i, "seed": 1000 + i,
              "prompt": f"Soak {i}: " + " ".join(rng.choice(words) for _ in range(4 + (i * 7) % 40))}
             for i in range(a.prompts)]
    log(f"references: {len(pairs)} pairs alone, {a.max_tokens} tokens each")
    t0 = time.time()
    refs = {}
    for p in pairs:
        outcome, text, tokens = t.complete(p, a.max_tokens, True)
        if outcome != "ok" or tokens != a.max_tokens:
            log(f"reference {p['id']} failed: {outcome} ({tokens} tokens)")
            return 2
        refs[p["id"]] = text
    log(f"references done in {time.time() - t0:.1f} s")

    probe = {"max_ms": 0.0, "n": 0, "fail": 0, "stop": False}

    def prober():
        while not probe["stop"]:
            s = time.time()
            try:
                ok = t.get("/health", timeout=30)[0] == 200
            except OSError:
                ok = False
            ms = (time.time() - s) * 1000
            probe["n"] += 1
            probe["max_ms"] = max(probe["max_ms"], ms)
            probe["fail"] += 0 if ok else 1
            time.sleep(1)

    def run_clients(stats, deadline, rounds=None):
        def client(k):
            r = random.Random(a.seed * 7919 + k)
            n = 0
            while (rounds is None and time.time() < deadline) or (rounds is not None and n < rounds):
                n += 1
                p = r.choice(pairs)
                stream = r.random() >= 0.25
                hang = r.randint(1, a.max_tokens // 2) if stream and r.random() < a.cancel else None
                outcome, text, tokens = t.complete(p, a.max_tokens, stream, hang)
                stats.add(outcome, p, text, tokens, refs[p["id"]], a.max_tokens)
        threads = [threading.Thread(target=client, args=(k,)) for k in range(a.concurrency)]
        for th in threads:
            th.start()
        return threads

    def idle_kv(timeout=60):
        """memra_kv_blocks_used once no sequence runs or waits (the prefix cache may keep blocks)."""
        end = time.time() + timeout
        while True:
            m = t.get("/metrics")[1]
            running, waiting = metric(m, "memra_scheduler_running") or 0, metric(m, "memra_scheduler_waiting") or 0
            if (running == 0 and waiting == 0) or time.time() > end:
                time.sleep(1)
                m = t.get("/metrics")[1]
                return metric(m, "memra_kv_blocks_used"), metric(m, "memra_prefix_cache_blocks"), running, waiting
            time.sleep(0.5)

    warm = Stats()
    for th in run_clients(warm, time.time() + a.warmup):
        th.join()
    if warm.errors or warm.mismatches:
        log(f"warm-up failed: {warm.errors[:3]} {warm.mismatches[:3]}")
    kv0, prefix0, _, _ = idle_kv()
    rss0 = rss_mb(a.pid)
    log(f"baseline after warm-up: RSS {rss0:.0f} MB, KV blocks used {kv0}, prefix-cache blocks {prefix0}")

    pt = threading.Thread(target=prober, daemon=True)
    pt.start()
    stats = Stats()
    start = time.time()
    deadline = start + a.duration
    threads = run_clients(stats, deadline)
    next_report = start + 30
    rss_trace = []
    while any(th.is_alive() for th in threads):
        time.sleep(1)
        if time.time() >= next_report:
            next_report += 30
            m = t.get("/metrics")[1]
            el = time.time() - start
            rss_trace.append([round(el), round(rss_mb(a.pid), 1)])
            log(f"{el:5.0f} s: {stats.requests} requests ({stats.finished} finished, {stats.hung_up} hung up), "
                f"{len(stats.errors)} errors, {len(stats.mismatches)} mismatches, {stats.tokens / el:.0f} tok/s, "
                f"RSS {rss_mb(a.pid):.0f} MB, KV used {metric(m, 'memra_kv_blocks_used')}, "
                f"running {metric(m, 'memra_scheduler_running')}, /health max {probe['max_ms']:.0f} ms")
    wall = time.time() - start
    kv1, prefix1, running1, waiting1 = idle_kv()
    time.sleep(2)
    rss1 = rss_mb(a.pid)
    probe["stop"] = True
    pt.join(timeout=5)

    summary = {
        "duration_s": round(wall, 1), "concurrency": a.concurrency, "cancel_share": a.cancel,
        "max_tokens": a.max_tokens, "pairs": len(pairs), "requests": stats.requests,
        "finished": stats.finished, "hung_up": stats.hung_up, "errors": len(stats.errors),
        "mismatches": len(stats.mismatches), "generated_tok_per_s": round(stats.tokens / wall, 1),
        "rss_mb_baseline": round(rss0, 1), "rss_mb_after": round(rss1, 1), "rss_mb_every_30_s": rss_trace,
        "kv_blocks_used_baseline": kv0, "kv_blocks_used_after": kv1,
        "prefix_cache_blocks_baseline": prefix0, "prefix_cache_blocks_after": prefix1,
        "scheduler_after": {"running": running1, "waiting": waiting1},
        "health_probes": probe["n"], "health_failures": probe["fail"], "health_max_ms": round(probe["max_ms"], 1),
        "first_errors": stats.errors[:10], "first_mismatches": stats.mismatches[:10],
        "warmup": {"seconds": a.warmup, "requests": warm.requests, "errors": len(warm.errors), "mismatches": len(warm.mismatches)},
    }
    checks = {
        "no errors": not stats.errors and not warm.errors,
        "outputs identical to solo runs": not stats.mismatches and not warm.mismatches,
        # Idle, every used block is the prefix cache's: no sequence kept any.
        "KV back to baseline (no block held by a sequence)": kv1 is not None and kv1 == (prefix1 or 0),
        f"RSS within {a.rss_slack_mb:.0f} MB of baseline": rss1 - rss0 <= a.rss_slack_mb,
        f"/health always under {a.probe_limit_ms:.0f} ms": probe["fail"] == 0 and probe["max_ms"] < a.probe_limit_ms,
        "requests hung up on": stats.hung_up > 0 or a.cancel == 0,
    }
    summary["checks"] = checks
    summary["pass"] = all(checks.values())
    print(json.dumps(summary, indent=1), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(summary, f, indent=1)
    for name, ok in checks.items():
        log(f"{'PASS' if ok else 'FAIL'}: {name}")
    return 0 if summary["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
