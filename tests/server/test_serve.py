"""`infinipot serve` through real clients: the official `openai` package and curl.

    python3 tests/server/test_serve.py INFINIPOT_BINARY MODEL.gguf [unittest args]

CI runs it on the tiny random-weight model (answers are noise, so the checks are about the
API, the conversations and the server's robustness, not what the model says); the README's
scripts/serve-check.sh runs it against SmolLM2. Every test fails, never skips, when a part is
missing (the openai package, curl).
"""
import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import openai

BIN, MODEL = sys.argv[1], sys.argv[2]
ALIAS = "test-model"


class Server:
    """One `infinipot serve` process on a free loopback port."""

    def __init__(self, *args):
        self.proc = subprocess.Popen([BIN, "serve", "-m", MODEL, "--port", "0", "--alias", ALIAS, *args],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.log = []
        deadline = time.time() + 600  # a cold kernel cache compiles first
        while True:
            line = self.proc.stderr.readline()
            if not line:
                raise RuntimeError("serve exited before listening:\n" + "".join(self.log))
            self.log.append(line)
            m = re.search(r"listening on http://([^:]+):(\d+)", line)
            if m:
                self.host, self.port = m.group(1), int(m.group(2))
                break
            if time.time() > deadline:
                raise RuntimeError("serve did not start:\n" + "".join(self.log))
        threading.Thread(target=self._drain, daemon=True).start()
        self.url = f"http://{self.host}:{self.port}"

    def _drain(self):
        for line in self.proc.stderr:
            self.log.append(line)

    def client(self, key="none", **kw):
        return openai.OpenAI(base_url=self.url + "/v1", api_key=key, max_retries=0, timeout=300, **kw)

    def curl(self, *args, data=None):
        """(status, body) of a curl call; data goes to stdin (-d @-)."""
        cmd = ["curl", "-sS", "-o", "-", "-w", "\n%{http_code}", *args]
        r = subprocess.run(cmd, input=data, capture_output=True, timeout=300)
        body, _, code = r.stdout.rpartition(b"\n")
        return int(code), body.decode("utf-8", "replace")

    def alive(self):
        return self.proc.poll() is None and self.curl(self.url + "/health")[0] == 200

    def rss_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        self.proc.stderr.close()
        return self.proc.returncode


def chat(client, messages, **kw):
    return client.chat.completions.create(model=ALIAS, messages=messages, **kw)


def document(n):
    names = ["Anna", "Boris", "Clara", "Dmitri", "Elena", "Farid", "Greta"]
    things = ["a red boat", "the old mill", "seven lanterns", "a blue kite", "the river gate"]
    return "".join(f"{names[i % 7]} saw {things[(i * 3) % 5]} on day {17 + i * 13}. " for i in range(n))


class Serve(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = Server("--pot", "256")
        cls.c = cls.srv.client()

    @classmethod
    def tearDownClass(cls):
        code = cls.srv.stop()
        assert code == 0, f"serve exited with {code}:\n" + "".join(cls.srv.log)

    def test_models_health_metrics(self):
        self.assertEqual([m.id for m in self.c.models.list()], [ALIAS])
        self.assertEqual(self.c.models.retrieve(ALIAS).id, ALIAS)
        with self.assertRaises(openai.NotFoundError):
            self.c.models.retrieve("no-such-model")
        code, body = self.srv.curl(self.srv.url + "/health")
        self.assertEqual((code, json.loads(body)["status"]), (200, "ok"))
        chat(self.c, [{"role": "user", "content": "count"}], max_tokens=3)
        code, text = self.srv.curl(self.srv.url + "/metrics")
        self.assertEqual(code, 200)
        for want in ['infinipot_requests_total{endpoint="/v1/chat/completions",status="200"}',
                     'infinipot_device_bytes{category="kv_cache"}', "infinipot_queue_depth 0",
                     "infinipot_generated_tokens_total", 'infinipot_conversations{where="memory"}']:
            self.assertIn(want, text)

    def test_chat_answers_with_usage(self):
        r = chat(self.c, [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello there!"}],
                 max_tokens=8)
        self.assertEqual(r.object, "chat.completion")
        self.assertEqual(r.model, ALIAS)
        self.assertEqual(r.choices[0].message.role, "assistant")
        self.assertIsInstance(r.choices[0].message.content, str)
        self.assertIn(r.choices[0].finish_reason, ("stop", "length"))
        self.assertLessEqual(r.usage.completion_tokens, 8)
        self.assertGreater(r.usage.prompt_tokens, 5)
        self.assertEqual(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens)
        if r.choices[0].finish_reason == "length":
            self.assertEqual(r.usage.completion_tokens, 8)
        # No max_tokens: the server's default, within what the pot leaves room for.
        r = chat(self.c, [{"role": "user", "content": "And without a limit?"}])
        self.assertGreater(r.usage.completion_tokens, 0)

    def test_stream_is_the_same_answer(self):
        msgs = [{"role": "user", "content": "Tell me about boats " + str(time.time())}]
        whole = chat(self.c, msgs, max_tokens=12)
        chunks = list(chat(self.c, msgs, max_tokens=12, stream=True, stream_options={"include_usage": True}))
        text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
        self.assertEqual(text, whole.choices[0].message.content)
        finals = [ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason]
        self.assertEqual(finals, [whole.choices[0].finish_reason])
        self.assertEqual(chunks[-1].usage.completion_tokens, whole.usage.completion_tokens)
        # curl sees server-sent events ending in [DONE].
        code, body = self.srv.curl(self.srv.url + "/v1/chat/completions", "-N", "-H", "Content-Type: application/json",
                                   "-d", "@-", data=json.dumps({"model": ALIAS, "messages": msgs, "max_tokens": 4,
                                                                "stream": True}).encode())
        self.assertEqual(code, 200)
        events = [l[6:] for l in body.splitlines() if l.startswith("data: ")]
        self.assertEqual(events[-1], "[DONE]")
        self.assertEqual(json.loads(events[0])["object"], "chat.completion.chunk")

    def test_a_held_conversation_reads_only_the_new_turn(self):
        msgs = [{"role": "user", "content": "My name is Ada " + str(time.time())}]
        r1 = chat(self.c, msgs, max_tokens=6)
        self.assertEqual(r1.model_extra["infinipot"]["conversation"], "new")
        msgs += [{"role": "assistant", "content": r1.choices[0].message.content},
                 {"role": "user", "content": "What is my name?"}]
        r2 = chat(self.c, msgs, max_tokens=6)
        self.assertEqual(r2.model_extra["infinipot"]["conversation"], "held")
        self.assertEqual(r2.model_extra["infinipot"]["held_messages"], 2)
        self.assertGreaterEqual(r2.usage.prompt_tokens_details.cached_tokens, r1.usage.prompt_tokens)
        # A history it does not hold (an edited reply) is read afresh, and still answered.
        edited = msgs[:1] + [{"role": "assistant", "content": "something else"}] + msgs[2:]
        r3 = chat(self.c, edited, max_tokens=4)
        self.assertEqual(r3.model_extra["infinipot"]["conversation"], "new")

    def test_a_long_conversation_stays_in_the_pot(self):
        msgs = [{"role": "system", "content": "You keep notes."}]
        peaks, distilled = [], 0
        for turn in range(24):
            msgs.append({"role": "user", "content": f"Note {turn}: " + document(1)})
            r = chat(self.c, msgs, max_tokens=10)
            if turn:
                self.assertEqual(r.model_extra["infinipot"]["conversation"], "held", f"turn {turn}")
            distilled = r.model_extra["infinipot"]["pot_distillations"]
            msgs.append({"role": "assistant", "content": r.choices[0].message.content})
            text = self.srv.curl(self.srv.url + "/metrics")[1]
            peaks.append(int(re.search(r"^infinipot_device_peak_bytes (\d+)", text, re.M).group(1)))
        self.assertGreaterEqual(distilled, 5, "the conversation is several pots long")
        self.assertGreater(r.usage.prompt_tokens, 800)
        self.assertEqual(len(set(peaks[8:])), 1, f"device peak grew with the turns: {peaks}")

    def test_stop_sequences(self):
        msgs = [{"role": "user", "content": "Write anything " + str(time.time())}]
        text = chat(self.c, msgs, max_tokens=16).choices[0].message.content
        self.assertGreaterEqual(len(text), 3, f"the answer is too short to cut: {text!r}")
        stop = text[1:3]
        want = text[:text.find(stop)]
        r = chat(self.c, msgs, max_tokens=16, stop=[stop, "\x00never"])
        self.assertEqual(r.choices[0].message.content, want)
        self.assertEqual(r.choices[0].finish_reason, "stop")
        streamed = "".join(ch.choices[0].delta.content or "" for ch in chat(self.c, msgs, max_tokens=16, stop=stop,
                                                                                stream=True) if ch.choices)
        self.assertEqual(streamed, want)

    def test_seeded_sampling_repeats(self):
        msgs = [{"role": "user", "content": "Pick words " + str(time.time())}]
        a = chat(self.c, msgs, max_tokens=10, temperature=1.0, top_p=0.9, seed=7)
        b = chat(self.c, msgs, max_tokens=10, temperature=1.0, top_p=0.9, seed=7)
        self.assertEqual(a.choices[0].message.content, b.choices[0].message.content)

    def test_completions(self):
        r = self.c.completions.create(model=ALIAS, prompt="Once upon a time " + document(30), max_tokens=6)
        self.assertEqual(r.object, "text_completion")
        self.assertIsInstance(r.choices[0].text, str)
        self.assertLessEqual(r.usage.completion_tokens, 6)
        self.assertGreaterEqual(r.model_extra["infinipot"]["distillations"], 1, "the prompt overflows the pot")
        parts = list(self.c.completions.create(model=ALIAS, prompt="Once upon a time " + document(30), max_tokens=6,
                                               stream=True))
        self.assertEqual("".join(p.choices[0].text for p in parts), r.choices[0].text)

    def test_errors_through_the_openai_client(self):
        ok = [{"role": "user", "content": "hi"}]
        cases = [
            (openai.NotFoundError, dict(model="gpt-4", messages=ok)),
            (openai.BadRequestError, dict(model=ALIAS, messages=ok, max_tokens=100000)),
            (openai.BadRequestError, dict(model=ALIAS, messages=ok, max_tokens=200)),  # above the pot's room
            (openai.BadRequestError, dict(model=ALIAS, messages=[{"role": "robot", "content": "hi"}])),
            (openai.BadRequestError, dict(model=ALIAS, messages=ok + [{"role": "assistant", "content": "x"}])),
            (openai.BadRequestError, dict(model=ALIAS, messages=[])),
            (openai.BadRequestError, dict(model=ALIAS, messages=ok, temperature=5)),
            (openai.BadRequestError, dict(model=ALIAS, messages=ok, n=2)),
            (openai.NotFoundError, dict(model=ALIAS, messages=ok, extra_body={"document": "doc-none"})),
        ]
        for err, kw in cases:
            with self.subTest(kw=kw), self.assertRaises(err) as cm:
                self.c.chat.completions.create(**kw)
            body = cm.exception.body
            self.assertIsInstance(body, dict)
            self.assertTrue(body.get("message"), body)
        with self.assertRaises(openai.BadRequestError) as cm:
            self.c.chat.completions.create(model=ALIAS, messages=ok, max_tokens=200)
        self.assertEqual(cm.exception.code, "context_length_exceeded")
        self.assertEqual(cm.exception.param, "max_tokens")

    def test_errors_through_curl(self):
        url = self.srv.url + "/v1/chat/completions"
        cases = [
            (b"{not json", 400, "invalid_json", None),
            (b"[1, 2]", 400, "invalid_json", None),
            (json.dumps({"model": ALIAS, "messages": [{"role": "user", "content": "x"}], "max_tokens": "ten"}).encode(),
             400, "invalid_type", "max_tokens"),
            (json.dumps({"model": ALIAS, "messages": "hello"}).encode(), 400, "invalid_type", "messages"),
            (json.dumps({"model": ALIAS, "messages": [{"role": "user", "content": 5}]}).encode(), 400, "invalid_type",
             "messages[0].content"),
            (json.dumps({"messages": [{"role": "user", "content": "x"}]}).encode(), 400, "missing_field", "model"),
            (b"\xff\xfe{}", 400, "invalid_json", None),
        ]
        for data, status, code, param in cases:
            with self.subTest(data=data[:40]):
                got, body = self.srv.curl(url, "-H", "Content-Type: application/json", "-d", "@-", data=data)
                self.assertEqual(got, status, body)
                err = json.loads(body)["error"]
                self.assertEqual(err["code"], code)
                self.assertEqual(err["param"], param)
                self.assertEqual(err["type"], "invalid_request_error")
        for method, path, status in [("GET", "/v1/nothing", 404), ("POST", "/v1/models", 404),
                                     ("DELETE", "/v1/documents/doc-none", 404)]:
            got, body = self.srv.curl("-X", method, *(["-d", "{}"] if method == "POST" else []), self.srv.url + path)
            self.assertEqual(got, status, f"{method} {path}: {body}")
            self.assertIn("message", json.loads(body)["error"])
        self.assertTrue(self.srv.alive())

    def test_documents_read_once_asked_many_times(self):
        text = document(80)
        code, body = self.srv.curl(self.srv.url + "/v1/documents", "-H", "Content-Type: text/plain",
                                   "--data-binary", "@-", data=text.encode())
        self.assertEqual(code, 200, body)
        doc = json.loads(body)
        self.assertGreater(doc["tokens"], 600)
        self.assertGreaterEqual(doc["distillations"], 2)
        q = [{"role": "user", "content": "Who saw the old mill?"}]
        a = chat(self.c, q, max_tokens=8, extra_body={"document": doc["id"]})
        b = chat(self.c, q, max_tokens=8, extra_body={"document": doc["id"]})
        self.assertEqual(a.choices[0].message.content, b.choices[0].message.content)
        self.assertGreaterEqual(a.usage.prompt_tokens_details.cached_tokens, doc["tokens"])
        self.assertLess(a.usage.prompt_tokens - a.usage.prompt_tokens_details.cached_tokens, 40,
                        "only the question is read")
        follow = q + [{"role": "assistant", "content": a.choices[0].message.content},
                      {"role": "user", "content": "On which day?"}]
        f = chat(self.c, follow, max_tokens=4, extra_body={"document": doc["id"]})
        self.assertEqual(f.model_extra["infinipot"]["conversation"], "held")
        code, body = self.srv.curl(self.srv.url + "/v1/documents")
        self.assertIn(doc["id"], [d["id"] for d in json.loads(body)["data"]])
        code, body = self.srv.curl(self.srv.url + "/v1/documents", "-H", "Content-Type: application/json",
                                   "-d", "@-", data=json.dumps({"text": "Short one."}).encode())
        self.assertEqual(code, 200, body)
        code, body = self.srv.curl("-X", "DELETE", self.srv.url + "/v1/documents/" + doc["id"])
        self.assertEqual((code, json.loads(body)["deleted"]), (200, True))
        with self.assertRaises(openai.NotFoundError):
            chat(self.c, q, max_tokens=4, extra_body={"document": doc["id"]})
        code, body = self.srv.curl(self.srv.url + "/v1/documents", "-H", "Content-Type: application/json", "-d", "@-",
                                   data=b'{"text": "   "}')
        self.assertEqual(code, 400, body)

    def test_a_client_gone_mid_stream(self):
        for _ in range(3):
            conn = http.client.HTTPConnection(self.srv.host, self.srv.port, timeout=120)
            conn.request("POST", "/v1/chat/completions", json.dumps(
                {"model": ALIAS, "messages": [{"role": "user", "content": "go on " + str(time.time())}],
                 "max_tokens": 40, "stream": True}), {"Content-Type": "application/json"})
            resp = conn.getresponse()
            self.assertEqual(resp.status, 200)
            resp.fp.readline()  # the first event, then gone
            conn.sock.shutdown(socket.SHUT_RDWR)
            conn.close()
        r = chat(self.c, [{"role": "user", "content": "still there?"}], max_tokens=3)
        self.assertLessEqual(r.usage.completion_tokens, 3)
        self.assertTrue(self.srv.alive())

    def metric(self, name):
        code, text = self.srv.curl(self.srv.url + "/metrics")
        self.assertEqual(code, 200)
        return float(re.search(r"^" + re.escape(name) + r" (\S+)$", text, re.M).group(1))

    def test_clients_gone_while_waiting_cancel_their_jobs(self):
        """A client that waits for a whole answer has nothing written to it until the end, so
        the server must notice on its own that it went away: a document being read stops
        between chunks, a chat waiting in the queue behind it is dropped unrun."""
        cancelled = self.metric("infinipot_jobs_cancelled_total")
        generated = self.metric("infinipot_generated_tokens_total")
        code, body = self.srv.curl(self.srv.url + "/v1/documents")
        docs = len(json.loads(body)["data"])

        def send(path, body):
            conn = http.client.HTTPConnection(self.srv.host, self.srv.port, timeout=120)
            conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
            return conn

        def gone(conn):
            conn.sock.shutdown(socket.SHUT_RDWR)
            conn.close()

        reading = send("/v1/documents", {"text": document(3000)})  # tens of seconds to read here
        time.sleep(1.0)
        waiting = send("/v1/chat/completions", {"model": ALIAS, "max_tokens": 20,
                                                "messages": [{"role": "user", "content": "queued " + str(time.time())}]})
        time.sleep(0.5)
        gone(waiting)
        time.sleep(0.5)
        gone(reading)
        t0 = time.time()
        r = chat(self.c, [{"role": "user", "content": "after them"}], max_tokens=2)
        waited = time.time() - t0
        self.assertLessEqual(r.usage.completion_tokens, 2)
        self.assertEqual(self.metric("infinipot_jobs_cancelled_total") - cancelled, 2)
        self.assertEqual(self.metric("infinipot_generated_tokens_total") - generated, r.usage.completion_tokens,
                         "the queued chat generated nothing")
        code, body = self.srv.curl(self.srv.url + "/v1/documents")
        self.assertEqual(len(json.loads(body)["data"]), docs, "the half-read document is not kept")
        self.assertLess(waited, 20, "the next request waited for the abandoned reading")

    def test_rapid_connects_and_concurrent_clients(self):
        for _ in range(300):
            s = socket.create_connection((self.srv.host, self.srv.port), timeout=10)
            s.close()
        results, lock = [], threading.Lock()

        def client(i):
            c = self.srv.client()
            for j in range(4):
                try:
                    r = chat(c, [{"role": "user", "content": f"client {i} request {j}"}], max_tokens=4)
                    status = 200 if r.choices[0].message.content is not None else -1
                except openai.APIStatusError as e:
                    status = e.status_code
                with lock:
                    results.append(status)

        threads = [threading.Thread(target=client, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=600)
            self.assertFalse(t.is_alive(), "a client hung")
        self.assertEqual(len(results), 32)
        self.assertTrue(set(results) <= {200, 503}, results)
        self.assertGreater(results.count(200), 0)
        self.assertTrue(self.srv.alive())


class Auth(unittest.TestCase):
    def test_every_request_needs_the_key(self):
        srv = Server("--pot", "256", "--api-key", "s3cret")
        try:
            with self.assertRaises(openai.AuthenticationError):
                srv.client("wrong").models.list()
            code, body = srv.curl(srv.url + "/v1/models")
            self.assertEqual(code, 401)
            self.assertEqual(json.loads(body)["error"]["code"], "invalid_api_key")
            code, _ = srv.curl(srv.url + "/health")
            self.assertEqual(code, 401)
            r = chat(srv.client("s3cret"), [{"role": "user", "content": "hi"}], max_tokens=2)
            self.assertLessEqual(r.usage.completion_tokens, 2)
        finally:
            self.assertEqual(srv.stop(), 0)


class Limits(unittest.TestCase):
    def test_body_limit_and_a_full_queue(self):
        srv = Server("--pot", "256", "--max-body", "4K", "--queue", "1", "--max-prompt-tokens", "2000")
        try:
            big = json.dumps({"model": ALIAS, "messages": [{"role": "user", "content": "x" * 8000}]}).encode()
            code, body = srv.curl(srv.url + "/v1/chat/completions", "-H", "Content-Type: application/json",
                                  "--data-binary", "@-", data=big)
            self.assertEqual(code, 413, body)
            self.assertEqual(json.loads(body)["error"]["code"], "request_too_large")
            with self.assertRaises(openai.BadRequestError) as cm:
                chat(srv.client(), [{"role": "user", "content": "word " * 700}], max_tokens=2)
            self.assertEqual(cm.exception.code, "context_length_exceeded")
            statuses, lock = [], threading.Lock()

            def one(i):
                try:
                    chat(srv.client(), [{"role": "user", "content": f"busy {i}"}], max_tokens=30)
                    s = 200
                except openai.APIStatusError as e:
                    s = e.status_code
                with lock:
                    statuses.append(s)

            threads = [threading.Thread(target=one, args=(i,)) for i in range(6)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=600)
            self.assertEqual(len(statuses), 6)
            self.assertTrue(set(statuses) <= {200, 503}, statuses)
            self.assertIn(503, statuses, "one running and one waiting: the others are refused at once")
            self.assertIn(200, statuses)
            self.assertTrue(srv.alive())
        finally:
            self.assertEqual(srv.stop(), 0)


class Sessions(unittest.TestCase):
    def test_conversations_beyond_memory_come_back_from_disk(self):
        cache = tempfile.mkdtemp()
        try:
            srv = Server("--pot", "256", "--sessions", "1", "--cache-dir", cache)
            c = srv.client()
            a = [{"role": "user", "content": "Conversation A " + document(3)}]
            ra = chat(c, a, max_tokens=5)
            b = [{"role": "user", "content": "Conversation B " + document(2)}]
            chat(c, b, max_tokens=5)
            self.assertTrue(any(f.endswith(".ipot") for f in os.listdir(cache)), "A was saved as a pot snapshot")
            a += [{"role": "assistant", "content": ra.choices[0].message.content}, {"role": "user", "content": "More?"}]
            ra2 = chat(c, a, max_tokens=5)
            self.assertEqual(ra2.model_extra["infinipot"]["conversation"], "held")
            self.assertEqual(srv.stop(), 0)
            # A new server finds A in the cache directory.
            srv = Server("--pot", "256", "--sessions", "1", "--cache-dir", cache)
            chat(srv.client(), b + [{"role": "assistant", "content": "x"}, {"role": "user", "content": "y"}],
                 max_tokens=2)  # B's history was edited: read afresh; A goes to disk
            a += [{"role": "assistant", "content": ra2.choices[0].message.content},
                  {"role": "user", "content": "And then?"}]
            ra3 = chat(srv.client(), a, max_tokens=5)
            self.assertEqual(ra3.model_extra["infinipot"]["conversation"], "held")
            self.assertEqual(ra3.model_extra["infinipot"]["held_messages"], 4)
            self.assertEqual(srv.stop(), 0)
        finally:
            shutil.rmtree(cache)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], *sys.argv[3:]], verbosity=2)
