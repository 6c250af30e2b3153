"""A fake OpenAI-compatible server for fault-injection tests and the overhead benchmark.

It answers `/v1/chat/completions` instantly (zero latency) and can misbehave on
purpose, chosen per prompt so a test knows which sample met which fault:
a prompt whose text contains `FAULT:<name>` gets that fault; `--fault NAME=RATE`
gives it to a seeded share of the other prompts. Transport faults (429, 5xx,
hang, reset, a cut or unreadable body, no choices) hit only the first
`--transient` tries of a prompt, so a client that retries succeeds; content
faults (a 400, odd answers) always hit. `--refuse STATUS` answers every chat
request with that status and an OpenAI-style error (401 bad key, 404 unknown
model, 400 and 422 an unknown model as vLLM-style servers, proxies and Ollama word
it, 501 ...), as a misconfigured run meets it. `--no-logprobs` answers a request
for log-probabilities without them, as a server that does not support them does.

A whole server can also fall ill, for endpoint-pool tests: after `--sick-after K` chat
requests every request (`/models` too) meets `--sick-mode` (500, 503, hang, reset) for
`--sick-for` seconds (default: for good). `--delay-s` adds latency to every answer and
`--slots N` serves at most N answers at once (the rest queue), like a GPU server's batch.

Safety: it binds 127.0.0.1 only, serves at most `--max-requests` requests and
lives at most `--max-seconds`, then exits by itself.

    python -m recharness.testing.fake_server --port 0 --port-file p.txt --fault 429=0.1
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import re
import time
from collections import Counter
from pathlib import Path

HOST = "127.0.0.1"

#: "bad-gzip": a 200 whose body says it is gzip and is not (a proxy's cut or corrupt compressed body);
#: "524", "529": Cloudflare's timeout and an "overloaded" endpoint, 5xx outside the common four
TRANSPORT_FAULTS = ("429", "429-retry-after", "500", "503", "524", "529", "hang", "reset", "truncated-json",
                    "empty-choices", "non-utf8", "error-choice", "bad-gzip")
SICK_MODES = ("500", "503", "hang", "reset")
#: "redirect": a 301 to https; "unsupported-param": OpenAI's 400 to `max_tokens` from a reasoning model;
#: "echo-key": a 400 whose text repeats the request's Authorization header (a careless proxy)
#: the account refused, for every request alike: "no-credit" DeepSeek's 402, "no-quota" OpenAI's 429
#: insufficient_quota, "bad-key-400" Gemini's OpenAI-compatible endpoint's answer to a wrong key
ACCOUNT_FAULTS = {
    "no-credit": (402, {"error": {"message": "Insufficient Balance", "type": "unknown_error"}}),
    "no-quota": (429, {"error": {"message": "You exceeded your current quota, please check your plan and billing "
                                            "details.", "type": "insufficient_quota", "code": "insufficient_quota"}}),
    "bad-key-400": (400, {"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.",
                                    "status": "INVALID_ARGUMENT"}}),
}
CONTENT_FAULTS = ("surrogate", "long-answer", "html-answer", "400", "redirect", "unsupported-param", "echo-key",
                  *ACCOUNT_FAULTS)
#: `--refuse STATUS`: what a server says when the run is misconfigured
REFUSALS = {401: "Incorrect API key provided", 403: "You are not allowed to use this model",
            404: "The model `fake-x` does not exist", 405: "Method not allowed", 501: "Not implemented",
            400: "Invalid model name passed in model=fake-x", 422: "model 'fake-x' not found, try pulling it first"}
FAULTS = TRANSPORT_FAULTS + CONTENT_FAULTS
_MARK = re.compile(r"FAULT:([a-z0-9-]+)")


class FakeServer:
    def __init__(self, *, faults: dict[str, float] | None = None, seed: int = 0, transient: int = 1,
                 answer: str = "1. Fargo\n2. Heat\n3. Casablanca", hang_s: float = 30.0, die_after: int | None = None,
                 max_requests: int = 100_000, max_seconds: float = 300.0, retry_after_s: float = 1.0,
                 delay_s: float = 0.0, sick_after: int | None = None, sick_mode: str = "500",
                 sick_for_s: float | None = None, slots: int | None = None, refuse: int | None = None,
                 no_logprobs: bool = False):
        if refuse is not None and refuse not in REFUSALS:
            raise ValueError(f"--refuse {refuse}: one of {', '.join(map(str, REFUSALS))}")
        self.refuse = refuse
        self.no_logprobs = no_logprobs
        if sick_mode not in SICK_MODES:
            raise ValueError(f"unknown sick mode {sick_mode!r}; known: {', '.join(SICK_MODES)}")
        unknown = set(faults or {}) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown faults {sorted(unknown)}; known: {', '.join(FAULTS)}")
        self.faults = dict(faults or {})
        self.seed = seed
        self.transient = transient
        self.answer = answer
        self.hang_s = hang_s
        self.die_after = die_after
        self.max_requests = max_requests
        self.max_seconds = max_seconds
        self.retry_after_s = retry_after_s
        self.delay_s = delay_s
        self.sick_after = sick_after
        self.sick_mode = sick_mode
        self.sick_for_s = sick_for_s
        self._sick_since: float | None = None
        self.chat_requests = 0
        self.slots = slots
        self._slots: asyncio.Semaphore | None = None
        self.tries: Counter[str] = Counter()
        self.served: Counter[str] = Counter()
        self.requests = 0
        self._done = asyncio.Event()
        self._server: asyncio.base_events.Server | None = None

    # -- which fault ----------------------------------------------------------------------------
    def fault_for(self, prompt: str) -> str | None:
        m = _MARK.search(prompt)
        if m:
            return m.group(1)
        if not self.faults:
            return None
        u = int.from_bytes(hashlib.sha256(f"{self.seed}\0{prompt}".encode("utf-8", "surrogatepass")).digest()[:8], "big") / 2**64
        acc = 0.0
        for name, rate in self.faults.items():
            acc += rate
            if u < acc:
                return name
        return None

    def sick(self) -> bool:
        """Whether the whole server is ill right now (after `sick_after` chat requests, for `sick_for_s`)."""
        if self.sick_after is None or self.chat_requests <= self.sick_after:
            return False
        if self._sick_since is None:
            self._sick_since = time.monotonic()
        return self.sick_for_s is None or time.monotonic() - self._sick_since < self.sick_for_s

    # -- HTTP -----------------------------------------------------------------------------------
    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
                body = await reader.readexactly(int(headers.get("content-length", "0") or 0))
                if not await self.respond(method, path, body, writer, headers):
                    return
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            if not writer.is_closing():
                writer.close()

    async def respond(self, method: str, path: str, body: bytes, writer: asyncio.StreamWriter,
                      headers: dict | None = None) -> bool:
        """Write one response; False closes the connection."""
        self.requests += 1
        if self.requests >= self.max_requests or (self.die_after is not None and self.requests > self.die_after):
            self._done.set()
            writer.transport.abort()
            return False
        if path.rstrip("/").endswith("/chat/completions"):
            self.chat_requests += 1
        if self.sick():
            self.served["sick"] += 1
            if self.sick_mode in ("500", "503"):
                return self._send(writer, int(self.sick_mode), {"error": {"message": "server is ill"}})
            if self.sick_mode == "hang":
                await asyncio.sleep(self.hang_s)
            writer.transport.abort()
            return False
        if path.rstrip("/").endswith("/models"):
            return self._send(writer, 200, {"object": "list", "data": [{"id": "fake", "object": "model"}]})
        if not path.rstrip("/").endswith("/chat/completions") or method != "POST":
            return self._send(writer, 404, {"error": {"message": f"no route {method} {path}"}})
        if self.refuse is not None:
            self.served[f"refused-{self.refuse}"] += 1
            return self._send(writer, self.refuse, {"error": {"message": REFUSALS[self.refuse], "type": "invalid_request"}})
        req = json.loads(body)
        prompt = "\n".join(str(m.get("content", "")) for m in req.get("messages", []))
        fault = self.fault_for(prompt)
        if fault in TRANSPORT_FAULTS:
            self.tries[prompt] += 1
            if self.tries[prompt] > self.transient:
                fault = None
        self.served[fault or "ok"] += 1
        if fault == "429":
            return self._send(writer, 429, {"error": {"message": "rate limited", "type": "rate_limit"}})
        if fault == "429-retry-after":
            return self._send(writer, 429, {"error": {"message": "rate limited"}},
                              extra_headers={"retry-after": f"{self.retry_after_s:g}"})
        if fault in ("500", "503", "524", "529"):
            return self._send(writer, int(fault), {"error": {"message": "server error"}})
        if fault == "400":
            return self._send(writer, 400, {"error": {"message": "prompt too long for the context window"}})
        if fault == "redirect":
            return self._send(writer, 301, {"error": {"message": "moved"}},
                              extra_headers={"location": "https://user:pw@example.invalid/v1/chat/completions"})
        if fault == "unsupported-param":
            return self._send(writer, 400, {"error": {
                "message": "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
                           "'max_completion_tokens' instead.", "type": "invalid_request_error",
                "param": "max_tokens", "code": "unsupported_parameter"}})
        if fault in ACCOUNT_FAULTS:
            return self._send(writer, *ACCOUNT_FAULTS[fault])
        if fault == "echo-key":
            return self._send(writer, 400, {"error": {"message": "bad header: authorization="
                                                      + (headers or {}).get("authorization", "")}})
        if fault == "hang":
            await asyncio.sleep(self.hang_s)
            writer.transport.abort()
            return False
        if fault == "reset":
            writer.transport.abort()
            return False
        if self.slots:
            if self._slots is None:
                self._slots = asyncio.Semaphore(self.slots)
            async with self._slots:
                await asyncio.sleep(self.delay_s)
        elif self.delay_s:
            await asyncio.sleep(self.delay_s)
        text = self.answer
        if fault == "long-answer":
            text = ("Fargo " * 20_000)[:100_000]
        elif fault == "html-answer":
            text = "<html><body><div class='x'>1</div><script>alert(1)</script><p>20 3 7</p></body></html>"
        payload = self._completion(req, text, logprobs=bool(req.get("logprobs")) and not self.no_logprobs)
        if fault == "empty-choices":
            payload["choices"] = []
        elif fault == "error-choice":  # OpenRouter: an upstream failure inside a 200
            payload["choices"][0].update(finish_reason="error", error={"message": "upstream provider error"})
        raw = json.dumps(payload).encode()
        if fault == "truncated-json":
            raw = raw[: len(raw) // 2]
        elif fault == "non-utf8":
            raw = raw.replace(b"Fargo", b"Farg\xff\xfe", 1)
        elif fault == "surrogate":
            raw = raw.replace(b"Fargo", b"Fargo \\ud800", 1)
        elif fault == "bad-gzip":
            return self._send_raw(writer, 200, b"\x1f\x8b\x08\x00not gzip at all", {"content-encoding": "gzip"})
        return self._send_raw(writer, 200, raw)

    @staticmethod
    def _completion(req: dict, text: str, logprobs: bool) -> dict:
        choice: dict = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        if logprobs:
            top = [{"token": "Yes", "logprob": -0.5, "bytes": None}, {"token": "No", "logprob": -1.0, "bytes": None}]
            choice["logprobs"] = {"content": [{"token": "Yes", "logprob": -0.5, "bytes": None, "top_logprobs": top}]}
        return {"id": "fake", "object": "chat.completion", "created": 0, "model": req.get("model", "fake"),
                "choices": [choice], "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}

    def _send(self, writer, status: int, obj: dict, extra_headers: dict | None = None) -> bool:
        return self._send_raw(writer, status, json.dumps(obj).encode(), extra_headers)

    @staticmethod
    def _send_raw(writer, status: int, raw: bytes, extra_headers: dict | None = None) -> bool:
        head = [f"HTTP/1.1 {status} X", "content-type: application/json", f"content-length: {len(raw)}"]
        head += [f"{k}: {v}" for k, v in (extra_headers or {}).items()]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + raw)
        return True

    # -- lifecycle ------------------------------------------------------------------------------
    async def serve(self, port: int = 0, port_file: Path | None = None) -> None:
        self._server = await asyncio.start_server(self.handle, HOST, port)
        actual = self._server.sockets[0].getsockname()[1]
        if port_file is not None:
            tmp = Path(str(port_file) + ".tmp")
            tmp.write_text(str(actual))
            os.replace(tmp, port_file)
        deadline = time.monotonic() + self.max_seconds
        try:
            await asyncio.wait_for(self._done.wait(), timeout=max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            pass
        self._server.close()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file", type=Path, help="write the bound port here (atomically) once listening")
    ap.add_argument("--fault", action="append", default=[], help=f"NAME=RATE; names: {', '.join(FAULTS)}")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--transient", type=int, default=1, help="tries of a prompt that meet its transport fault")
    ap.add_argument("--answer", default="1. Fargo\n2. Heat\n3. Casablanca")
    ap.add_argument("--hang-s", type=float, default=30.0)
    ap.add_argument("--delay-s", type=float, default=0.0, help="latency of every answer")
    ap.add_argument("--die-after", type=int, help="exit after this many requests (server down mid-run)")
    ap.add_argument("--sick-after", type=int, help="after this many chat requests every request meets --sick-mode")
    ap.add_argument("--sick-mode", default="500", choices=SICK_MODES)
    ap.add_argument("--sick-for", type=float, help="seconds the illness lasts (default: for good)")
    ap.add_argument("--slots", type=int, help="answers served at once; the rest queue (with --delay-s)")
    ap.add_argument("--refuse", type=int, choices=sorted(REFUSALS), help="answer every chat request with this status")
    ap.add_argument("--no-logprobs", action="store_true", help="never return log-probabilities, even when asked")
    ap.add_argument("--max-requests", type=int, default=100_000)
    ap.add_argument("--max-seconds", type=float, default=300.0)
    args = ap.parse_args(argv)
    faults = {}
    for f in args.fault:
        name, _, rate = f.partition("=")
        faults[name] = float(rate or 1.0)
    srv = FakeServer(faults=faults, seed=args.seed, transient=args.transient, answer=args.answer, hang_s=args.hang_s,
                     die_after=args.die_after, max_requests=args.max_requests, max_seconds=args.max_seconds,
                     delay_s=args.delay_s, sick_after=args.sick_after, sick_mode=args.sick_mode,
                     sick_for_s=args.sick_for, slots=args.slots, refuse=args.refuse, no_logprobs=args.no_logprobs)
    asyncio.run(srv.serve(args.port, args.port_file))



class FakeServerProcess:
    """The fake server in its own process (its own core, as a real server), for tests and benchmarks.

    with FakeServerProcess(faults={"429": 0.1}) as srv: ... srv.base_url ...
    """

    def __init__(self, *, faults: dict[str, float] | None = None, seed: int = 0, transient: int = 1,
                 hang_s: float = 30.0, die_after: int | None = None, max_seconds: float = 300.0,
                 answer: str | None = None, delay_s: float = 0.0, max_requests: int = 100_000,
                 sick_after: int | None = None, sick_mode: str = "500", sick_for_s: float | None = None,
                 slots: int | None = None, refuse: int | None = None, no_logprobs: bool = False):
        import subprocess
        import sys
        import tempfile

        self._tmp = tempfile.TemporaryDirectory(prefix="fake-openai-")
        self.port_file = Path(self._tmp.name) / "port"
        cmd = [sys.executable, "-m", "recharness.testing.fake_server", "--port-file", str(self.port_file),
               "--seed", str(seed), "--transient", str(transient), "--hang-s", str(hang_s),
               "--max-seconds", str(max_seconds), "--delay-s", str(delay_s), "--max-requests", str(max_requests)]
        for name, rate in (faults or {}).items():
            cmd += ["--fault", f"{name}={rate}"]
        if die_after is not None:
            cmd += ["--die-after", str(die_after)]
        if answer is not None:
            cmd += ["--answer", answer]
        if sick_after is not None:
            cmd += ["--sick-after", str(sick_after), "--sick-mode", sick_mode]
            if sick_for_s is not None:
                cmd += ["--sick-for", str(sick_for_s)]
        if slots is not None:
            cmd += ["--slots", str(slots)]
        if refuse is not None:
            cmd += ["--refuse", str(refuse)]
        if no_logprobs:
            cmd.append("--no-logprobs")
        self.cmd = cmd
        self.proc: subprocess.Popen | None = None
        self.port: int | None = None

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}/v1"

    def __enter__(self) -> FakeServerProcess:
        import subprocess

        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 20
        while not self.port_file.exists():
            if self.proc.poll() is not None:
                raise RuntimeError(f"fake server exited: {self.proc.stderr.read().decode(errors='replace')}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("fake server did not start within 20 s")
            time.sleep(0.02)
        self.port = int(self.port_file.read_text())
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        if self.proc is not None and self.proc.stderr is not None:
            self.proc.stderr.close()

    def __exit__(self, *exc) -> None:
        self.stop()
        self._tmp.cleanup()


if __name__ == "__main__":
    main()
