#!/usr/bin/env python3
"""Scripted mock LLM server speaking OpenAI Chat Completions (stdlib only).

Used by the pi-*, opencode-* and hermes-* oracle scripts.  Companion of
mockllm.py (Anthropic Messages + OpenAI Responses); same command line and the
same log format, so a test can treat both alike.

Endpoints (127.0.0.1 only):
  POST /v1/chat/completions   (also /chat/completions) - SSE streaming when
                              "stream": true, plain JSON otherwise
  GET  /v1/models             (also /models, /v1/models/<id>)
  anything else               -> 404, still logged

Every request is appended as one JSON line to --log:
  {"ts", "method", "path", "headers": {selected}, "body": <parsed JSON>}
so a test can read exactly which history the client sent to the model.

Script (stateless, decided per request from the request itself):
  mode "tool" (default):
    - last message has role "tool"           -> final text answer (--final-text)
    - request offers a shell-like tool        -> one tool call running --command
      (bash / terminal / shell / any tool with a "command" parameter; the
      arguments are built from the tool's own JSON schema)
    - request offers no tools (titles,
      summaries, other side requests)         -> short text ("Mock title")
  mode "text":
    - every request with tools gets the final text answer, so one user turn
      costs exactly one model request (used by the resume checks).
With ORACLE_MOCK_SCRIPT in the environment (added in this project's copy):
a JSON list of steps [{"text": ..., "command": ...}, ...]; in mode "tool" the
k-th tool call after the latest user message runs step k's command (with its
text as the reply), and the final text comes once every step has a result.
Unset: one step, --command.
With --reasoning (default on) the tool-call reply also streams a
"reasoning_content" delta, so clients that keep reasoning store some.

Usage:
  mockllm_openai.py --log requests.jsonl [--port 0] [--port-file F]
                    [--mode tool|text] [--command "echo hello > note.txt"]
                    [--final-text "..."] [--no-reasoning] [--verbose]
With --port 0 a free port is chosen; it is printed on stdout and written to
--port-file (atomically) once the socket is listening.

Report mode (no server; used by the *-resume-check.sh scripts):
  mockllm_openai.py --report --log requests.jsonl --prompt PROBE --client pi
                    [--session ID] [--cwd DIR] [--exit-code RC]
                    [--stdout FILE] [--stderr FILE] [--body]
prints one JSON object describing the first chat-completions request whose
messages contain PROBE in a user message (one that offers tools if there is
such, since title requests carry the prompt too):
  {"client","session_id","exit_code","cwd","model_requests",
   "prior_messages" (non-system messages before the probe),
   "summary" (one short line per message), "messages" (as sent; or "body")}
exit 0: client exited 0 and sent the probe together with earlier history;
exit 1: no request carried the probe, or the client exited non-zero;
exit 3: the probe was sent but with no earlier history (session dropped).
"""

# Copied from shared/oracle/mockllm_openai.py into the project's test harness.

import argparse
import gzip
import json
import os
import sys
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
COUNTER = [0]
# random per-process tag in generated ids: a resumed conversation is served by a
# new mock process, and tool-call ids must not repeat inside one conversation
TAG = os.urandom(3).hex()
ARGS = None

LOGGED_HEADERS = (
    "content-type", "content-encoding", "user-agent", "accept", "authorization-present",
    "x-stainless-lang", "x-stainless-package-version", "http-referer", "x-title",
    "x-session-affinity", "session_id", "x-opencode-session", "x-opencode-request",
    "x-initiator", "openai-beta",
)

SHELL_TOOL_NAMES = ("bash", "terminal", "shell", "Bash", "run_shell_command",
                    "execute_command", "shell_command", "exec_command", "run_command")


def next_id():
    with LOCK:
        COUNTER[0] += 1
        return COUNTER[0]


def log_record(rec):
    line = json.dumps(rec, ensure_ascii=False)
    with LOCK:
        with open(ARGS.log, "a", encoding="utf-8") as f:
            f.write(line + "\n")


# --------------------------------------------------------------------------
# script
# --------------------------------------------------------------------------

def tools_of(body):
    out = []
    for t in body.get("tools") or []:
        if not isinstance(t, dict):
            continue
        fn = t.get("function") if isinstance(t.get("function"), dict) else t
        if fn.get("name"):
            out.append((fn["name"], fn.get("parameters") or {}))
    return out


def pick_shell_tool(body):
    tools = tools_of(body)
    by_name = {n: p for n, p in tools}
    for n in SHELL_TOOL_NAMES:
        if n in by_name:
            return n, by_name[n]
    for n, p in tools:
        if "command" in ((p or {}).get("properties") or {}):
            return n, p
    return None


def default_for(schema):
    t = (schema or {}).get("type")
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), "string")
    if "enum" in (schema or {}) and schema["enum"]:
        return schema["enum"][0]
    return {"string": "", "boolean": False, "integer": 0, "number": 0,
            "array": [], "object": {}}.get(t, "")


def script_steps():
    raw = os.environ.get("ORACLE_MOCK_SCRIPT")
    if raw:
        return json.loads(raw)
    return [{"text": "I'll create the note with a shell command.", "command": ARGS.command}]


def results_since_user(body):
    """Tool results since the latest user message."""
    n = 0
    for m in reversed(body.get("messages") or []):
        if not isinstance(m, dict):
            continue
        if m.get("role") == "tool":
            n += 1
        elif m.get("role") == "user":
            break
    return n


def build_args(params, command):
    props = (params or {}).get("properties") or {}
    required = (params or {}).get("required") or []
    args = {}
    for k in required:
        args[k] = default_for(props.get(k))
    if "command" in props:
        cmd_schema = props["command"]
        if cmd_schema.get("type") == "array":
            args["command"] = ["bash", "-lc", command]
        else:
            args["command"] = command
    if "description" in props:
        args["description"] = "Write a note file"
    return args


def last_role(body):
    msgs = body.get("messages") or []
    return msgs[-1].get("role") if msgs and isinstance(msgs[-1], dict) else None


def plan(body):
    """Return dict(content, reasoning, tool_calls, finish_reason)."""
    n = next_id()
    has_tools = bool(tools_of(body))
    steps = script_steps()
    done = results_since_user(body)
    if ARGS.mode == "tool" and done < len(steps) and has_tools:
        pick = pick_shell_tool(body)
        if pick is not None:
            name, params = pick
            step = steps[done]
            return {
                "content": step["text"],
                "reasoning": "The user wants a note file; I will run a shell command." if ARGS.reasoning else None,
                "tool_calls": [{"id": "call_mock%s%06d" % (TAG, n), "type": "function",
                                "function": {"name": name,
                                             "arguments": json.dumps(build_args(params, step["command"]))}}],
                "finish_reason": "tool_calls",
            }
    if last_role(body) == "tool" or has_tools:
        text = ARGS.final_text
    else:
        text = "Mock title"
    return {"content": text, "reasoning": None, "tool_calls": None, "finish_reason": "stop"}


USAGE = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120,
         "prompt_tokens_details": {"cached_tokens": 0},
         "completion_tokens_details": {"reasoning_tokens": 0}}


def completion_obj(body, p):
    msg = {"role": "assistant", "content": p["content"]}
    if p["reasoning"]:
        msg["reasoning_content"] = p["reasoning"]
    if p["tool_calls"]:
        msg["tool_calls"] = p["tool_calls"]
    return {"id": "chatcmpl-mock%s%06d" % (TAG, next_id()), "object": "chat.completion",
            "created": int(time.time()), "model": body.get("model", "mock-model"),
            "choices": [{"index": 0, "message": msg, "finish_reason": p["finish_reason"]}],
            "usage": USAGE}


def stream_chunks(body, p):
    cid = "chatcmpl-mock%s%06d" % (TAG, next_id())
    created = int(time.time())
    model = body.get("model", "mock-model")

    def chunk(delta, finish=None, **extra):
        c = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
             "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        c.update(extra)
        return ("data: %s\n\n" % json.dumps(c)).encode()

    out = [chunk({"role": "assistant", "content": ""})]
    if p["reasoning"]:
        out.append(chunk({"reasoning_content": p["reasoning"]}))
    if p["content"]:
        text = p["content"]
        half = len(text) // 2
        out.append(chunk({"content": text[:half]}))
        out.append(chunk({"content": text[half:]}))
    for i, tc in enumerate(p["tool_calls"] or []):
        out.append(chunk({"tool_calls": [{"index": i, "id": tc["id"], "type": "function",
                                          "function": {"name": tc["function"]["name"], "arguments": ""}}]}))
        a = tc["function"]["arguments"]
        half = len(a) // 2
        out.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": a[:half]}}]}))
        out.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": a[half:]}}]}))
    out.append(chunk({}, p["finish_reason"]))
    # usage chunk (OpenAI sends it when stream_options.include_usage; harmless otherwise)
    u = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
         "choices": [], "usage": USAGE}
    out.append(("data: %s\n\n" % json.dumps(u)).encode())
    out.append(b"data: [DONE]\n\n")
    return b"".join(out)


# --------------------------------------------------------------------------
# HTTP plumbing
# --------------------------------------------------------------------------

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "mockllm-openai/1"

    def log_message(self, fmt, *a):
        if ARGS.verbose:
            sys.stderr.write("mockllm_openai: " + (fmt % a) + "\n")

    def _read_body(self):
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not length and (self.headers.get("transfer-encoding") or "").lower() == "chunked":
            parts = []
            while True:
                size = int(self.rfile.readline().strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    break
                parts.append(self.rfile.read(size))
                self.rfile.readline()
            raw = b"".join(parts)
        enc = (self.headers.get("content-encoding") or "").lower()
        try:
            if enc == "gzip":
                raw = gzip.decompress(raw)
            elif enc == "deflate":
                raw = zlib.decompress(raw)
        except Exception:
            pass
        if not raw:
            return None, raw
        try:
            return json.loads(raw.decode("utf-8")), raw
        except Exception:
            return None, raw

    def _send(self, code, payload, ctype="application/json"):
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(data)))
        if ctype.startswith("text/event-stream"):
            self.send_header("cache-control", "no-cache")
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _log(self, body, raw):
        hdrs = {k.lower(): v for k, v in self.headers.items() if k.lower() in LOGGED_HEADERS}
        if self.headers.get("authorization"):
            hdrs["authorization-present"] = True
        rec = {"ts": time.time(), "method": self.command, "path": self.path, "headers": hdrs,
               "body": body}
        if body is None and raw:
            rec["raw_len"] = len(raw)
            rec["raw_head"] = raw[:200].decode("latin-1")
        log_record(rec)

    def do_GET(self):
        path = self.path.split("?")[0].rstrip("/")
        self._log(None, b"")
        models = [{"id": m, "object": "model", "created": 0, "owned_by": "mock",
                   "context_length": 131072} for m in ARGS.models]
        if path.endswith("/models"):
            self._send(200, {"object": "list", "data": models})
            return
        if "/models/" in path:
            mid = path.split("/models/", 1)[1]
            self._send(200, {"id": mid, "object": "model", "created": 0, "owned_by": "mock",
                             "context_length": 131072})
            return
        self._send(404, {"error": {"message": "mock: no such path", "type": "not_found"}})

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_POST(self):
        body, raw = self._read_body()
        path = self.path.split("?")[0].rstrip("/")
        self._log(body, raw)
        if body is None:
            body = {}
        if path.endswith("/chat/completions"):
            p = plan(body)
            if body.get("stream"):
                self._send(200, stream_chunks(body, p), "text/event-stream; charset=utf-8")
            else:
                self._send(200, completion_obj(body, p))
            return
        self._send(404, {"error": {"message": "mock: no such path", "type": "not_found"}})


def _texts(content):
    if isinstance(content, str):
        yield content
    elif isinstance(content, list):
        for b in content:
            if isinstance(b, dict) and isinstance(b.get("text"), str):
                yield b["text"]


def _summarize(msgs):
    out = []
    for m in msgs:
        role = m.get("role")
        for t in _texts(m.get("content")):
            if role == "tool":
                out.append("tool:tool_result:%s:%s" % (m.get("tool_call_id"), t[:60]))
            else:
                out.append("%s:text:%s" % (role, t[:80]))
        if m.get("reasoning_content"):
            out.append("%s:reasoning:%s" % (role, str(m["reasoning_content"])[:60]))
        for tc in m.get("tool_calls") or []:
            fn = tc.get("function") or {}
            out.append("%s:tool_call:%s:%s:%s" % (role, tc.get("id"), fn.get("name"),
                                                str(fn.get("arguments"))[:60]))
    return out


def report(a):
    reqs = []
    try:
        with open(a.log, encoding="utf-8") as f:
            reqs = [json.loads(l) for l in f if l.strip()]
    except FileNotFoundError:
        pass
    chat = [r for r in reqs if r.get("method") == "POST"
            and r.get("path", "").split("?")[0].rstrip("/").endswith("/chat/completions")]
    carrying = []
    for r in chat:
        msgs = (r.get("body") or {}).get("messages") or []
        if any(m.get("role") == "user" and any(a.prompt in t for t in _texts(m.get("content")))
               for m in msgs if isinstance(m, dict)):
            carrying.append(r["body"])
    # title requests carry the prompt too, without tools: prefer requests with tools
    chosen = next((b for b in carrying if b.get("tools")), carrying[0] if carrying else None)
    res = {"client": a.client, "session_id": a.session, "exit_code": a.exit_code,
           "cwd": a.cwd, "model_requests": len(chat)}

    def tail(path):
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                return f.read()[-2000:]
        except Exception:
            return None
    if chosen is None:
        res["error"] = "no model request carried the prompt"
        res["client_stdout"] = tail(a.stdout) if a.stdout else None
        res["client_stderr"] = tail(a.stderr) if a.stderr else None
        print(json.dumps(res, indent=1, ensure_ascii=False))
        return 1
    msgs = chosen.get("messages") or []
    probe = max(i for i, m in enumerate(msgs) if m.get("role") == "user"
                and any(a.prompt in t for t in _texts(m.get("content"))))
    res["prior_messages"] = len([m for m in msgs[:probe] if m.get("role") not in ("system", "developer")])
    res["summary"] = _summarize(msgs)
    if a.body:
        res["body"] = chosen
    else:
        res["messages"] = msgs
    if a.exit_code != 0:
        res["client_stderr"] = tail(a.stderr) if a.stderr else None
    print(json.dumps(res, indent=1, ensure_ascii=False))
    if a.exit_code != 0:
        return 1
    return 0 if res["prior_messages"] > 0 else 3


def main():
    global ARGS
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--log", required=True)
    ap.add_argument("--mode", choices=["tool", "text"], default="tool")
    ap.add_argument("--command", default="echo hello > note.txt")
    ap.add_argument("--final-text", default="Done: the note was written.")
    ap.add_argument("--models", default="mock-model",
                    help="comma-separated model ids listed by GET /v1/models")
    ap.add_argument("--no-reasoning", dest="reasoning", action="store_false")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--report", action="store_true", help="print a history report from --log and exit")
    ap.add_argument("--prompt", default="ORACLE_RESUME_PROBE")
    ap.add_argument("--client", default="?")
    ap.add_argument("--session")
    ap.add_argument("--cwd")
    ap.add_argument("--exit-code", type=int, default=0)
    ap.add_argument("--stdout")
    ap.add_argument("--stderr")
    ap.add_argument("--body", action="store_true")
    ARGS = ap.parse_args()
    if ARGS.report:
        sys.exit(report(ARGS))
    ARGS.models = [m for m in ARGS.models.split(",") if m]
    srv = ThreadingHTTPServer(("127.0.0.1", ARGS.port), Handler)
    srv.daemon_threads = True
    port = srv.server_address[1]
    if ARGS.port_file:
        tmp = ARGS.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(port))
        os.replace(tmp, ARGS.port_file)
    print(port, flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
