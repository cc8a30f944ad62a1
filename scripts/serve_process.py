"""`infinipot serve` as a child process for the serve benchmarks (scripts/bench-documents.py,
scripts/load-test.py): started on a free loopback port, stopped with SIGTERM, and what it runs on."""
import os
import platform
import re
import signal
import subprocess
import sys
import threading
import time

import openai


class Server:
    """`infinipot serve` on a free loopback port (--port 0); stop() sends SIGTERM."""

    def __init__(self, binary, args):
        self.proc = subprocess.Popen([binary, "serve", "--port", "0", *args], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        self.log, self.line = [], ""
        deadline = time.time() + 900  # a cold kernel cache compiles first
        while True:
            line = self.proc.stderr.readline()
            if not line:
                raise RuntimeError("serve exited before listening:\n" + "".join(self.log))
            self.log.append(line)
            m = re.search(r"listening on http://([^:]+):(\d+)", line)
            if m:
                self.host, self.port, self.line = m.group(1), int(m.group(2)), line.strip()
                break
            if time.time() > deadline:
                raise RuntimeError("serve did not start:\n" + "".join(self.log))
        threading.Thread(target=lambda: [self.log.append(l) for l in self.proc.stderr], daemon=True).start()
        self.url = f"http://{self.host}:{self.port}"

    def rss_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                print("serve did not stop in 60 s after SIGTERM: killed", file=sys.stderr)
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def machine_info(binary, srv_line):
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "")
    except OSError:
        pass
    version = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout.strip()
    m = re.search(r"device ([^,]+)", srv_line)
    return {"cpu": cpu or platform.processor(), "cores": os.cpu_count(), "device": m.group(1) if m else "",
            "build": version, "python": platform.python_version(), "openai": openai.__version__}


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def add_server_args(ap):
    """The options every serve benchmark takes: the binary, the model, the pot, the device cap."""
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "infinipot"))
    ap.add_argument("-m", "--model", default=os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--pot", type=int, default=1024)
    ap.add_argument("--device-mem", help="passed to serve, e.g. 512M")
