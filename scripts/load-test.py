#!/usr/bin/env python3
"""Load and faults against `infinipot serve` on loopback, and the server's memory across them.

What it does. It starts its own `infinipot serve -m MODEL --pot 1024 --api-key KEY --max-body 1M`
(a random key) on a free loopback port (--port 0) and runs three phases:

  load        --clients threads x --requests chat completions each (default 8 x 25) through the
              official openai client: every request a new short conversation, max_tokens 16,
              streaming and non-streaming alternately, client timeout 300 s. Each ends in a
              reply (200), an HTTP status (429 and 503 are accepted refusals of a full queue), or
              a failure (a timeout, a lost connection, a stream without its finish_reason).
  faults      each checked for its status and OpenAI's error shape {"error": {"message", "type",
              "code"}} (docs/serve.md), and followed by GET /health == 200: malformed JSON (400),
              "messages": 5 and "max_tokens": "x" (400), a body above --max-body (413; 2M against
              1M), an unknown model (404), a wrong and a missing key (401), a client gone
              mid-stream (the first event read, the socket closed; then a request must still be
              answered) and --rapid raw TCP connect/close pairs without a request (1,000).
  sequential  one client, requests one after another until --total chat requests in all (500).

VmRSS of the server (/proc/PID/status) is read after --warmup answered requests (50) and after
--total; the run passes when every request was answered or refused with a status, every fault
got its status and shape and left /health at 200, RSS grew by at most --max-rss-growth percent
(5), and the server exited 0 on SIGTERM. Exit status 0 on a pass, 1 on a fail (each failure is
printed).

    scripts/load-test.py --json /tmp/load-test.json                                   # full size
    scripts/load-test.py --clients 2 --requests 3 --total 20 --rapid 50 --json /tmp/s.json  # smoke

The --json record: machine (cpu, cores, device, build), model, settings; outcomes (counts per
outcome: "200", "429", "503", "http NNN", "timeout", "connection", "incomplete", "error");
latency_s (p50, p99, max of answered requests; by phase too); faults (one per fault: want and
got status, code, shape_ok, health_after, ok, detail); rss_kib (start, warm, end) and
rss_growth_pct; failures (the reasons of a fail); passed.
"""
import argparse
import http.client
import json
import math
import os
import re
import secrets
import socket
import sys
import threading
import time

import openai

from serve_process import ROOT, Server, add_server_args, machine_info

PROMPTS = ["Say hello.", "Name a colour.", "Count to five.", "What is two plus two?", "Name a fruit.",
           "Give me a word that rhymes with cat.", "What day comes after Monday?", "Say something kind."]


def size(text):
    m = re.fullmatch(r"(\d+)([KMG]?)", text.upper())
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[m.group(2)]


class Test:
    def __init__(self, a, srv, key, model):
        self.a, self.srv, self.key, self.model = a, srv, key, model
        self.results, self.lock, self.rss = [], threading.Lock(), {"start_kib": srv.rss_kib()}
        self.failures = []

    def client(self):
        return openai.OpenAI(base_url=self.srv.url + "/v1", api_key=self.key, max_retries=0, timeout=self.a.timeout)

    def chat(self, client, phase, n, stream):
        """One chat request; records {phase, stream, outcome, latency_s}."""
        msgs = [{"role": "user", "content": f"Request {n} ({phase}): {PROMPTS[n % len(PROMPTS)]}"}]
        t0 = time.perf_counter()
        try:
            if stream:
                done = False
                for ch in client.chat.completions.create(model=self.model, messages=msgs, max_tokens=self.a.max_tokens,
                                                         stream=True):
                    done = done or bool(ch.choices and ch.choices[0].finish_reason)
                outcome = "200" if done else "incomplete"
            else:
                r = client.chat.completions.create(model=self.model, messages=msgs, max_tokens=self.a.max_tokens)
                outcome = "200" if r.choices and r.choices[0].finish_reason else "incomplete"
        except openai.APIStatusError as e:
            outcome = str(e.status_code) if e.status_code in (429, 503) else f"http {e.status_code}"
        except openai.APITimeoutError:
            outcome = "timeout"
        except openai.APIConnectionError:
            outcome = "connection"
        except Exception as e:  # an unparsable answer, a broken stream
            outcome = f"error {type(e).__name__}"
        row = {"phase": phase, "stream": stream, "outcome": outcome, "latency_s": round(time.perf_counter() - t0, 3)}
        with self.lock:
            self.results.append(row)
            if sum(r["outcome"] == "200" for r in self.results) == self.a.warmup and "warm_kib" not in self.rss:
                self.rss["warm_kib"] = self.srv.rss_kib()
        return outcome

    def load(self):
        def worker(i):
            c = self.client()
            for j in range(self.a.requests):
                self.chat(c, "load", i * self.a.requests + j, (i + j) % 2 == 1)
        threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(self.a.clients)]
        for t in threads:
            t.start()
        deadline = time.time() + self.a.timeout * (self.a.requests + 1)
        for t in threads:
            t.join(max(1, deadline - time.time()))
            if t.is_alive():
                self.failures.append("a load client hung past its timeouts")

    def sequential(self):
        c = self.client()
        n = len(self.results)
        while len([r for r in self.results if r["phase"] != "fault"]) < self.a.total:
            self.chat(c, "sequential", n, n % 2 == 1)
            n += 1

    # -- faults --------------------------------------------------------------------------------
    def raw(self, method, path, body=b"", headers=None, key=True):
        """One request on its own socket: (status, parsed JSON or None, detail). Sends what it can
        of the body even when the server answers early, then reads the answer."""
        hdrs = {"Host": f"{self.srv.host}:{self.srv.port}", "Connection": "close", **(headers or {})}
        if key:
            hdrs["Authorization"] = f"Bearer {self.key if key is True else key}"
        if body or method == "POST":
            hdrs["Content-Length"] = str(len(body))
        head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in hdrs.items()) + "\r\n"
        detail = ""
        with socket.create_connection((self.srv.host, self.srv.port), timeout=60) as s:
            try:
                s.sendall(head.encode() + body)
            except OSError as e:
                detail = f"send stopped: {e!r}; "
            try:
                resp = http.client.HTTPResponse(s)
                resp.begin()
                data = resp.read()
            except (OSError, http.client.HTTPException) as e:
                return None, None, detail + f"no answer read: {e!r}"
        try:
            return resp.status, json.loads(data), detail
        except ValueError:
            return resp.status, None, detail + f"body not JSON: {data[:200]!r}"

    def health(self):
        try:
            return self.raw("GET", "/health")[0]
        except OSError as e:
            return f"{e!r}"

    def fault(self, name, want_status, want_code, send):
        row = {"fault": name, "want_status": want_status, "want_code": want_code}
        try:
            status, body, detail = send()
        except Exception as e:
            status, body, detail = None, None, f"{e!r}"
        err = body.get("error") if isinstance(body, dict) else None
        shape = isinstance(err, dict) and isinstance(err.get("message"), str) and bool(err["message"]) \
            and isinstance(err.get("type"), str) and "code" in err
        row.update(status=status, code=err.get("code") if isinstance(err, dict) else None,
                   shape_ok=shape if want_code else None, detail=detail, health_after=self.health())
        row["ok"] = (status == want_status and row["health_after"] == 200 and
                     (not want_code or (shape and row["code"] == want_code)))
        if not row["ok"]:
            self.failures.append(f"fault {name}: {json.dumps(row)}")
        self.faults.append(row)

    def chat_body(self, **kw):
        return json.dumps({"model": self.model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4,
                           **kw}).encode()

    def generated(self):
        """infinipot_generated_tokens_total, once the device is idle."""
        conn = http.client.HTTPConnection(self.srv.host, self.srv.port, timeout=60)
        for _ in range(600):
            conn.request("GET", "/health", headers={"Authorization": f"Bearer {self.key}"})
            h = json.loads(conn.getresponse().read())
            if not h.get("busy") and not h.get("queue_depth"):
                break
            time.sleep(0.1)
        conn.request("GET", "/metrics", headers={"Authorization": f"Bearer {self.key}"})
        text = conn.getresponse().read().decode()
        conn.close()
        return int(float(re.search(r"^infinipot_generated_tokens_total (\S+)", text, re.M).group(1)))

    def gone_mid_stream(self):
        want, before = self.a.max_tokens * 8, self.generated()
        conn = http.client.HTTPConnection(self.srv.host, self.srv.port, timeout=120)
        conn.request("POST", "/v1/chat/completions", self.chat_body(
            messages=[{"role": "user", "content": "Tell me a long story about a lighthouse."}], max_tokens=want,
            stream=True), {"Content-Type": "application/json", "Authorization": f"Bearer {self.key}"})
        resp = conn.getresponse()
        status = resp.status
        first = resp.readline()  # through the chunked encoding: 'data: {...}'
        conn.sock.shutdown(socket.SHUT_RDWR)
        conn.close()
        spent = self.generated() - before
        after = self.chat(self.client(), "fault", 10**6, False)
        ok = status == 200 and first.startswith(b"data: ") and after == "200"
        return (200 if ok else None), None, (f"first event {first[:40]!r}...; the server generated {spent} of its "
                                             f"max_tokens {want} after the client left; the next request: {after}")

    def rapid(self):
        errors, slow, t0 = 0, [], time.perf_counter()
        for _ in range(self.a.rapid):
            t = time.perf_counter()
            try:
                socket.create_connection((self.srv.host, self.srv.port), timeout=10).close()
            except OSError:
                errors += 1
            slow += [time.perf_counter() - t] if time.perf_counter() - t > 0.5 else []
        took = time.perf_counter() - t0
        after = self.chat(self.client(), "fault", 10**6 + 1, True)
        return (200 if errors == 0 and after == "200" else None), None, \
            f"{self.a.rapid} connect/close in {took:.1f} s, {errors} failed, {len(slow)} took over 0.5 s " \
            f"(max {max(slow, default=0):.2f} s); the next request: {after}"

    def run_faults(self):
        self.faults = []
        j = {"Content-Type": "application/json"}
        post = lambda body, **kw: lambda: self.raw("POST", "/v1/chat/completions", body, j, **kw)
        big = self.chat_body(messages=[{"role": "user", "content": "x" * size(self.a.oversize)}])
        self.fault("malformed JSON", 400, "invalid_json", post(b'{"model": "x", "messages": [{'))
        self.fault('"messages": 5', 400, "invalid_type", post(json.dumps({"model": self.model, "messages": 5}).encode()))
        self.fault('"max_tokens": "x"', 400, "invalid_type", post(self.chat_body(max_tokens="x")))
        self.fault(f"body of {self.a.oversize} (--max-body {self.a.max_body})", 413, "request_too_large", post(big))
        self.fault("unknown model", 404, "model_not_found", post(self.chat_body(model="gpt-4o")))
        self.fault("wrong key", 401, "invalid_api_key", post(self.chat_body(), key="wrong-" + self.key))
        self.fault("missing key", 401, "invalid_api_key", post(self.chat_body(), key=False))
        self.fault("client gone mid-stream", 200, None, self.gone_mid_stream)
        self.fault(f"{self.a.rapid} rapid connect/close", 200, None, self.rapid)


def pct(xs, p):
    xs = sorted(xs)
    return xs[max(0, math.ceil(p / 100 * len(xs)) - 1)] if xs else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_server_args(ap)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--requests", type=int, default=25, help="per client in the load phase")
    ap.add_argument("--total", type=int, default=500, help="chat requests in all (load + sequential)")
    ap.add_argument("--warmup", type=int, default=50, help="answered requests before the first RSS reading")
    ap.add_argument("--rapid", type=int, default=1000, help="raw connect/close pairs")
    ap.add_argument("--max-body", default="1M", help="the server's --max-body")
    ap.add_argument("--oversize", default="2M", help="the body sent against it")
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--timeout", type=float, default=300, help="client timeout per request, s")
    ap.add_argument("--max-rss-growth", type=float, default=5.0, help="percent")
    ap.add_argument("--json", help="write the record here")
    a = ap.parse_args()
    a.warmup = min(a.warmup, max(1, a.total // 2))

    key = "sk-" + secrets.token_hex(16)
    args = ["-m", a.model, "--pot", str(a.pot), "--api-key", key, "--max-body", a.max_body] + \
        (["--device-mem", a.device_mem] if a.device_mem else [])
    t_start = time.perf_counter()
    srv = Server(a.bin, args)
    timings = {}
    try:
        info = machine_info(a.bin, srv.line)
        test = Test(a, srv, key, None)
        test.model = test.client().models.list().data[0].id
        for phase in ("load", "faults", "sequential"):
            t0 = time.perf_counter()
            {"load": test.load, "faults": test.run_faults, "sequential": test.sequential}[phase]()
            timings[phase] = round(time.perf_counter() - t0, 1)
        test.rss["end_kib"] = srv.rss_kib()
        alive = srv.proc.poll() is None and test.health() == 200
    finally:
        code = srv.stop()
    failures = test.failures
    if not alive:
        failures.append("the server was not alive at the end")
    if code != 0:
        failures.append(f"serve exited with {code} after SIGTERM; its log ends:\n" + "".join(srv.log[-20:]))
    outcomes = {}
    for r in test.results:
        outcomes[r["outcome"]] = outcomes.get(r["outcome"], 0) + 1
    bad = {k: v for k, v in outcomes.items() if k not in ("200", "429", "503")}
    if bad:
        failures.append(f"requests neither answered nor refused: {bad}")
    rss = test.rss
    growth = None
    if "warm_kib" in rss:
        growth = round(100.0 * (rss["end_kib"] - rss["warm_kib"]) / rss["warm_kib"], 2)
        if growth > a.max_rss_growth:
            failures.append(f"RSS grew {growth}% (> {a.max_rss_growth}%) from {rss['warm_kib']} to {rss['end_kib']} KiB")
    else:
        failures.append(f"fewer than --warmup {a.warmup} requests were answered: no warm RSS reading")
    lat = lambda phase: [r["latency_s"] for r in test.results if r["outcome"] == "200" and phase in (None, r["phase"])]
    latency = {ph or "all": {"n": len(lat(ph)), "p50": pct(lat(ph), 50), "p99": pct(lat(ph), 99),
                             "max": max(lat(ph), default=None)} for ph in (None, "load", "sequential")}
    record = {"bench": "load-test", "machine": info, "model": os.path.abspath(a.model),
              "model_bytes": os.path.getsize(a.model), "settings": {k: v for k, v in vars(a).items() if k != "bin"},
              "requests": len(test.results), "outcomes": outcomes, "latency_s": latency, "faults": test.faults,
              "rss_kib": rss, "rss_growth_pct": growth, "phase_s": timings, "serve_exit": code,
              "elapsed_s": round(time.perf_counter() - t_start, 1), "failures": failures, "passed": not failures}

    print(f"{info['build']} on {info['cpu']} ({info['cores']} cores), device {info['device']}")
    print(f"model {os.path.basename(a.model)}, pot {a.pot}; {a.clients} clients x {a.requests} requests, "
          f"{a.total} in all; phases {timings} s\n")
    print("| outcome | requests |\n|---|---:|")
    for k, v in sorted(outcomes.items()):
        print(f"| {k} | {v} |")
    print("\n| answered | n | p50 s | p99 s | max s |\n|---|---:|---:|---:|---:|")
    for k, v in latency.items():
        print(f"| {k} | {v['n']} | {v['p50']} | {v['p99']} | {v['max']} |")
    print("\n| fault | want | got | code | shape | /health after | ok |\n|---|---|---|---|---|---|---|")
    for f in test.faults:
        print(f"| {f['fault']} | {f['want_status']} {f['want_code'] or ''} | {f['status']} | {f['code'] or ''} | "
              f"{'' if f['shape_ok'] is None else ('ok' if f['shape_ok'] else 'BAD')} | {f['health_after']} | "
              f"{'yes' if f['ok'] else 'NO'} |")
    for f in test.faults:
        if f["detail"]:
            print(f"- {f['fault']}: {f['detail']}")
    print(f"\nRSS: start {rss.get('start_kib')} KiB, after {a.warmup} answered {rss.get('warm_kib')} KiB, "
          f"after {len(test.results)} requests {rss.get('end_kib')} KiB: growth {growth}%")
    print("\nPASS" if not failures else "\nFAIL:\n- " + "\n- ".join(failures))
    if a.json:
        with open(a.json, "w") as out:
            json.dump(record, out, indent=1)
            out.write("\n")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
