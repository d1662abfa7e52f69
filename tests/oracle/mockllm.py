#!/usr/bin/env python3
"""Scripted mock LLM server for oracle tests (Python standard library only).

Speaks just enough of two wire protocols for real coding-agent clients to run a
full tool-using turn against it:

  * Anthropic Messages API  (POST /v1/messages, SSE streaming or plain JSON,
    POST /v1/messages/count_tokens, GET /v1/models)        -> Claude Code
  * OpenAI Responses API    (POST /v1/responses, SSE streaming,
    GET /v1/models)                                         -> Codex CLI

It listens on 127.0.0.1 only.  Every request (method, path, selected headers,
JSON body) is appended as one JSON line to the --log file so a test can read
exactly what history the client sent to the model.

Script (stateless, decided per request from the request itself):
  mode "tool" (default):
    - if the newest input item is a tool result  -> final text answer
    - elif the request offers a shell-like tool   -> one tool call
                                                     (Claude: Bash, Codex: its shell tool)
    - else (side requests: titles, summaries...)  -> short text answer
  mode "text":
    - always a short text answer (one request per user turn); used by the
      resume checks so that exactly one model request carries the history.

  --tool-name NAME --tool-input JSON (added in this project's copy):
    in mode "tool", when the request offers the tool NAME (e.g. an MCP
    tool, mcp__git-session__search), call it with JSON instead of Bash
    (Claude: a tool_use; Codex: a function_call, inside the tool's
    namespace when Codex offers it in one).

  ORACLE_MOCK_SCRIPT in the environment (added in this project's copy): a
    JSON list of steps [{"text": ..., "command": ...}, ...]; in mode "tool"
    the k-th shell call after the latest user prompt runs step k's command
    (with its text before the call), and the final text comes once every
    step has its result.  Unset: one step, --command.

Copied from shared/oracle/mockllm.py into the project's test harness.

Usage:
  mockllm.py --log requests.jsonl [--port 0] [--port-file F] [--mode tool|text]
             [--command "echo hello > note.txt"] [--final-text "..."] [--claude-subagent]
With --port 0 a free port is chosen and written to --port-file (if given) once
the socket is listening; the port is also printed on stdout.
"""

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
# Per-process prefix for generated ids: a resumed session is served by a new
# mock process, and ids must not repeat inside one conversation (Claude Code
# merges assistant records by message.id and drops repeated tool_use ids).
RUN = os.urandom(4).hex()
SUBAGENT_MARK = "[oracle-subagent]"  # marks the delegated prompt, so sub-agents don't delegate again
COUNTER = [0]
ARGS = None

LOGGED_HEADERS = (
    "content-type", "content-encoding", "user-agent", "anthropic-version",
    "anthropic-beta", "x-app", "originator", "session_id", "session-id",
    "conversation_id", "x-claude-code-session-id", "openai-beta", "accept",
    "x-stainless-lang", "x-stainless-package-version", "version",
)


def next_id():
    with LOCK:
        COUNTER[0] += 1
        return COUNTER[0]


def log_record(rec):
    line = json.dumps(rec, ensure_ascii=False)
    with LOCK:
        with open(ARGS.log, "a", encoding="utf-8") as f:
            f.write(line + "\n")


def sse(event, data):
    return ("event: %s\ndata: %s\n\n" % (event, json.dumps(data))).encode()


# --------------------------------------------------------------------------
# Anthropic Messages API
# --------------------------------------------------------------------------

def _anth_blocks(msg):
    c = msg.get("content")
    if isinstance(c, str):
        return [{"type": "text", "text": c}]
    return [b for b in c or [] if isinstance(b, dict)]


def anth_last_is_tool_result(body):
    """True when a tool result has come back since the latest real user
    prompt (a user message with text that is not a <system-reminder> or
    harness caveat and carries no tool_result).  Claude Code sometimes sends
    reminders as separate user messages after a tool result, so looking at
    the last message alone is not enough."""
    msgs = body.get("messages") or []
    seen_result = False
    for m in reversed(msgs):
        if m.get("role") != "user":
            continue
        blocks = _anth_blocks(m)
        if any(b.get("type") == "tool_result" for b in blocks):
            seen_result = True
            continue
        prompt_like = any(b.get("type") == "text" and not b.get("text", "").lstrip().startswith("<")
                          for b in blocks)
        if prompt_like:
            return seen_result
    return seen_result


def script_steps():
    raw = os.environ.get("ORACLE_MOCK_SCRIPT")
    if raw:
        return json.loads(raw)
    return [{"text": "I'll create the note with a shell command.", "command": ARGS.command}]


def anth_results_since_prompt(body):
    """Tool results since the latest real user prompt (as anth_last_is_tool_result)."""
    n = 0
    for m in reversed(body.get("messages") or []):
        if m.get("role") != "user":
            continue
        blocks = _anth_blocks(m)
        results = sum(1 for b in blocks if b.get("type") == "tool_result")
        if results:
            n += results
            continue
        if any(b.get("type") == "text" and not b.get("text", "").lstrip().startswith("<") for b in blocks):
            break
    return n


def anth_step(body):
    """The script step due now, or None."""
    steps = script_steps()
    done = anth_results_since_prompt(body)
    return steps[done] if done < len(steps) else None


def anth_tool_names(body):
    return [t.get("name") for t in (body.get("tools") or []) if isinstance(t, dict)]


def anth_is_compaction(body):
    """Claude Code's /compact (and auto-compact) request: the last user turn
    asks for an <analysis> + <summary> of the conversation."""
    msgs = body.get("messages") or []
    if not msgs or msgs[-1].get("role") != "user":
        return False
    c = msgs[-1].get("content")
    texts = [c] if isinstance(c, str) else [b.get("text", "") for b in c or [] if isinstance(b, dict)]
    return any("<summary>" in t and "summary of the conversation" in t for t in texts)


def anth_plan(body):
    """Return list of content blocks for the reply and the stop_reason."""
    n = next_id()
    if anth_is_compaction(body):
        return [{"type": "text", "text": "<analysis>Mock analysis.</analysis>\n<summary>MOCK-SUMMARY: "
                 "the user asked for a note file and the assistant wrote it.</summary>"}], "end_turn"
    thinking_on = isinstance(body.get("thinking"), dict) and \
        body["thinking"].get("type") not in (None, "disabled")
    blocks = []
    if ARGS.mode == "tool" and ARGS.claude_subagent and not anth_last_is_tool_result(body) \
            and "Agent" in anth_tool_names(body) and SUBAGENT_MARK not in json.dumps(body.get("messages")):
        # main agent delegates to a foreground sub-agent (whose own requests,
        # lacking the Agent tool, then get the Bash script below)
        blocks.append({"type": "text", "text": "I'll delegate this to a sub-agent."})
        blocks.append({"type": "tool_use", "id": "toolu_mock_" + RUN + "_%06d" % n, "name": "Agent",
                       "input": {"description": "Write the note", "subagent_type": "general-purpose",
                                 "prompt": SUBAGENT_MARK + " Write hello into note.txt in the current directory.",
                                 "run_in_background": False}})
        return blocks, "tool_use"
    if ARGS.mode == "tool" and ARGS.tool_name and not anth_last_is_tool_result(body) \
            and ARGS.tool_name in anth_tool_names(body):
        blocks.append({"type": "text", "text": "I'll look it up in the recorded sessions."})
        blocks.append({"type": "tool_use", "id": "toolu_mock_" + RUN + "_%06d" % n, "name": ARGS.tool_name,
                       "input": json.loads(ARGS.tool_input)})
        return blocks, "tool_use"
    step = anth_step(body)
    if ARGS.mode == "tool" and step is not None and "Bash" in anth_tool_names(body):
        if thinking_on:
            blocks.append({"type": "thinking",
                           "thinking": "The user wants a note file; I will run a shell command.",
                           "signature": "mock-signature-%d" % n})
        blocks.append({"type": "text", "text": step["text"]})
        blocks.append({"type": "tool_use", "id": "toolu_mock_" + RUN + "_%06d" % n, "name": "Bash",
                       "input": {"command": step["command"],
                                 "description": "Write a note file"}})
        return blocks, "tool_use"
    if anth_last_is_tool_result(body):
        text = ARGS.final_text
    elif body.get("tools"):
        text = ARGS.final_text if ARGS.mode == "text" else "Done."
    else:
        text = "Mock summary"
    if thinking_on and body.get("tools"):
        blocks.append({"type": "thinking", "thinking": "Wrapping up.",
                       "signature": "mock-signature-%d" % n})
    blocks.append({"type": "text", "text": text})
    return blocks, "end_turn"


def anth_message(body, blocks, stop_reason):
    return {
        "id": "msg_mock_" + RUN + "_%06d" % next_id(),
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "claude-mock"),
        "content": blocks,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 100, "output_tokens": 20,
                  "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
    }


def anth_stream(msg):
    out = []
    start = dict(msg)
    start["content"] = []
    start["stop_reason"] = None
    start["usage"] = dict(msg["usage"], output_tokens=1)
    out.append(sse("message_start", {"type": "message_start", "message": start}))
    out.append(sse("ping", {"type": "ping"}))
    for i, b in enumerate(msg["content"]):
        if b["type"] == "text":
            out.append(sse("content_block_start", {"type": "content_block_start", "index": i,
                                                   "content_block": {"type": "text", "text": ""}}))
            out.append(sse("content_block_delta", {"type": "content_block_delta", "index": i,
                                                   "delta": {"type": "text_delta", "text": b["text"]}}))
        elif b["type"] == "thinking":
            out.append(sse("content_block_start", {"type": "content_block_start", "index": i,
                                                   "content_block": {"type": "thinking", "thinking": "",
                                                                     "signature": ""}}))
            out.append(sse("content_block_delta", {"type": "content_block_delta", "index": i,
                                                   "delta": {"type": "thinking_delta",
                                                             "thinking": b["thinking"]}}))
            out.append(sse("content_block_delta", {"type": "content_block_delta", "index": i,
                                                   "delta": {"type": "signature_delta",
                                                             "signature": b["signature"]}}))
        elif b["type"] == "tool_use":
            out.append(sse("content_block_start", {"type": "content_block_start", "index": i,
                                                   "content_block": {"type": "tool_use", "id": b["id"],
                                                                     "name": b["name"], "input": {}}}))
            out.append(sse("content_block_delta", {"type": "content_block_delta", "index": i,
                                                   "delta": {"type": "input_json_delta",
                                                             "partial_json": json.dumps(b["input"])}}))
        out.append(sse("content_block_stop", {"type": "content_block_stop", "index": i}))
    out.append(sse("message_delta", {"type": "message_delta",
                                     "delta": {"stop_reason": msg["stop_reason"], "stop_sequence": None},
                                     "usage": {"output_tokens": msg["usage"]["output_tokens"]}}))
    out.append(sse("message_stop", {"type": "message_stop"}))
    return b"".join(out)


# --------------------------------------------------------------------------
# OpenAI Responses API
# --------------------------------------------------------------------------

def oai_tool_names(body):
    """Names of the tools offered, including those delivered in-band as an
    `additional_tools` input item and those grouped in namespaces."""
    names = []

    def walk(tools):
        for t in tools or []:
            if not isinstance(t, dict):
                continue
            if t.get("type") == "namespace":
                walk(t.get("tools"))
            else:
                names.append(t.get("name") or t.get("type"))
    walk(body.get("tools"))
    for it in body.get("input") or []:
        if isinstance(it, dict) and it.get("type") == "additional_tools":
            walk(it.get("tools"))
    return names


def oai_has_code_mode_exec(body):
    """True when `exec` is offered as a freeform (custom) tool: Codex "code mode"."""
    def walk(tools):
        for t in tools or []:
            if not isinstance(t, dict):
                continue
            if t.get("type") == "namespace":
                if walk(t.get("tools")):
                    return True
            elif t.get("type") == "custom" and t.get("name") == "exec":
                return True
        return False
    if walk(body.get("tools")):
        return True
    return any(isinstance(it, dict) and it.get("type") == "additional_tools" and walk(it.get("tools"))
               for it in body.get("input") or [])


OAI_OUTPUT_TYPES = ("function_call_output", "custom_tool_call_output", "local_shell_call_output",
                    "tool_search_output")


def oai_last_is_tool_output(body):
    """True when a tool output has come back since the latest real user
    message (not an <environment_context>-style harness message)."""
    items = body.get("input") or []
    if not isinstance(items, list):
        return False
    for it in reversed(items):
        if not isinstance(it, dict):
            continue
        if it.get("type") in OAI_OUTPUT_TYPES:
            return True
        if it.get("type") == "message" and it.get("role") == "user":
            texts = [c.get("text", "") for c in it.get("content") or [] if isinstance(c, dict)]
            if any(t and not t.lstrip().startswith("<") for t in texts):
                return False
    return False


def oai_results_since_prompt(body):
    """Tool outputs since the latest real user message (as oai_last_is_tool_output)."""
    items = body.get("input") or []
    if not isinstance(items, list):
        return 0
    n = 0
    for it in reversed(items):
        if not isinstance(it, dict):
            continue
        if it.get("type") in OAI_OUTPUT_TYPES:
            n += 1
        elif it.get("type") == "message" and it.get("role") == "user":
            texts = [c.get("text", "") for c in it.get("content") or [] if isinstance(c, dict)]
            if any(t and not t.lstrip().startswith("<") for t in texts):
                break
    return n


def oai_shell_call(body, n, cmd):
    names = oai_tool_names(body)
    call_id = "call_mock_" + RUN + "_%06d" % n
    if oai_has_code_mode_exec(body):
        js = "const r = await tools.exec_command({cmd: %s});\ntext(r);\n" % json.dumps(cmd)
        return {"type": "custom_tool_call", "id": "ctc_mock_" + RUN + "_%06d" % n, "call_id": call_id,
                "name": "exec", "input": js, "status": "completed"}
    if "exec_command" in names:
        return {"type": "function_call", "id": "fc_mock_" + RUN + "_%06d" % n, "call_id": call_id,
                "name": "exec_command", "arguments": json.dumps({"cmd": cmd}), "status": "completed"}
    if "shell_command" in names:
        return {"type": "function_call", "id": "fc_mock_" + RUN + "_%06d" % n, "call_id": call_id,
                "name": "shell_command", "arguments": json.dumps({"command": cmd}),
                "status": "completed"}
    if "shell" in names:
        return {"type": "function_call", "id": "fc_mock_" + RUN + "_%06d" % n, "call_id": call_id,
                "name": "shell", "arguments": json.dumps({"command": ["bash", "-lc", cmd]}),
                "status": "completed"}
    if "local_shell" in names:
        return {"type": "local_shell_call", "id": "lsh_mock_" + RUN + "_%06d" % n, "call_id": call_id,
                "status": "completed",
                "action": {"type": "exec", "command": ["bash", "-lc", cmd]}}
    return None


def oai_named_call(body, n):
    """A function call of --tool-name when the request offers it, either as
    a plain function tool of that name or as tool NAME of a namespace
    (Codex groups an MCP server's tools in one, `mcp__git_session`, and
    NAME is then `mcp__git_session__search`)."""
    call_id = "call_mock_" + RUN + "_%06d" % n
    call = {"type": "function_call", "id": "fc_mock_" + RUN + "_%06d" % n, "call_id": call_id,
            "name": ARGS.tool_name, "arguments": ARGS.tool_input, "status": "completed"}

    def walk(tools, namespace):
        for t in tools or []:
            if not isinstance(t, dict):
                continue
            if t.get("type") == "namespace":
                found = walk(t.get("tools"), t.get("name"))
                if found:
                    return found
            elif namespace and ARGS.tool_name in (namespace + t.get("name", ""),
                                                  namespace + "__" + t.get("name", "")):
                return dict(call, name=t.get("name"), namespace=namespace)
            elif t.get("name") == ARGS.tool_name:
                return call
        return None
    found = walk(body.get("tools"), None)
    for it in body.get("input") or []:
        if not found and isinstance(it, dict) and it.get("type") == "additional_tools":
            found = walk(it.get("tools"), None)
    return found


def oai_plan(body):
    n = next_id()
    items = []
    inp = body.get("input") or []
    last = inp[-1] if isinstance(inp, list) and inp and isinstance(inp[-1], dict) else {}
    if last.get("type") == "message" and last.get("role") == "user" and any(
            "CONTEXT CHECKPOINT COMPACTION" in (c.get("text") or "")
            for c in last.get("content") or [] if isinstance(c, dict)):
        # Codex local compaction (non-OpenAI providers): a plain-text summary.
        return [{"type": "message", "role": "assistant", "id": "msg_mock_" + RUN + "_%06d" % n,
                 "status": "completed",
                 "content": [{"type": "output_text", "annotations": [],
                              "text": "MOCK-SUMMARY: the user asked for a note file and it was written."}]}]
    if last.get("type") == "compaction_trigger":
        # Codex "remote compaction v2": exactly one opaque compaction item.
        return [{"type": "compaction", "id": "cmp_mock_" + RUN + "_%06d" % n,
                 "encrypted_content": "MOCK-COMPACTION-%06d" % n}]
    reasoning_on = isinstance(body.get("reasoning"), dict)
    if ARGS.mode == "tool" and ARGS.tool_name and not oai_last_is_tool_output(body):
        call = oai_named_call(body, n)
        if call is not None:
            items.append({"type": "message", "role": "assistant", "id": "msg_mock_" + RUN + "_%06da" % n,
                          "status": "completed", "phase": "commentary",
                          "content": [{"type": "output_text", "annotations": [],
                                       "text": "I'll look it up in the recorded sessions."}]})
            items.append(call)
            return items
    steps = script_steps()
    done = oai_results_since_prompt(body)
    if ARGS.mode == "tool" and done < len(steps):
        call = oai_shell_call(body, n, steps[done]["command"])
        if call is not None:
            if reasoning_on:
                items.append({"type": "reasoning", "id": "rs_mock_" + RUN + "_%06d" % n,
                              "summary": [{"type": "summary_text",
                                           "text": "**Planning** I will write the note with a shell command."}],
                              "content": None, "encrypted_content": None})
            items.append({"type": "message", "role": "assistant", "id": "msg_mock_" + RUN + "_%06da" % n,
                          "status": "completed", "phase": "commentary",
                          "content": [{"type": "output_text", "annotations": [],
                                       "text": steps[done]["text"]}]})
            items.append(call)
            return items
    has_tools = bool(oai_tool_names(body))
    text = ARGS.final_text if (oai_last_is_tool_output(body) or ARGS.mode == "text" or has_tools) \
        else "Mock summary"
    if reasoning_on and has_tools:
        items.append({"type": "reasoning", "id": "rs_mock_" + RUN + "_%06d" % n,
                      "summary": [{"type": "summary_text", "text": "**Wrapping up**"}],
                      "content": None, "encrypted_content": None})
    items.append({"type": "message", "role": "assistant", "id": "msg_mock_" + RUN + "_%06d" % n,
                  "status": "completed", "phase": "final_answer",
                  "content": [{"type": "output_text", "annotations": [], "text": text}]})
    return items


def oai_response_obj(body, rid, items, status):
    return {"id": rid, "object": "response", "created_at": int(time.time()), "status": status,
            "model": body.get("model", "gpt-mock"), "output": items,
            "usage": {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens": 20, "output_tokens_details": {"reasoning_tokens": 0},
                      "total_tokens": 120}}


def oai_stream(body, items):
    rid = "resp_mock_" + RUN + "_%06d" % next_id()
    out = [sse("response.created", {"type": "response.created",
                                     "response": oai_response_obj(body, rid, [], "in_progress")})]
    seq = 0
    for idx, it in enumerate(items):
        added = dict(it)
        if it["type"] == "message":
            added["content"] = []
            added["status"] = "in_progress"
        out.append(sse("response.output_item.added", {"type": "response.output_item.added",
                                                       "output_index": idx, "item": added}))
        if it["type"] == "reasoning":
            for si, s in enumerate(it["summary"]):
                out.append(sse("response.reasoning_summary_part.added",
                               {"type": "response.reasoning_summary_part.added", "item_id": it["id"],
                                "output_index": idx, "summary_index": si,
                                "part": {"type": "summary_text", "text": ""}}))
                out.append(sse("response.reasoning_summary_text.delta",
                               {"type": "response.reasoning_summary_text.delta", "item_id": it["id"],
                                "output_index": idx, "summary_index": si, "delta": s["text"]}))
                out.append(sse("response.reasoning_summary_text.done",
                               {"type": "response.reasoning_summary_text.done", "item_id": it["id"],
                                "output_index": idx, "summary_index": si, "text": s["text"]}))
        elif it["type"] == "message":
            text = it["content"][0]["text"]
            out.append(sse("response.content_part.added",
                           {"type": "response.content_part.added", "item_id": it["id"],
                            "output_index": idx, "content_index": 0,
                            "part": {"type": "output_text", "text": "", "annotations": []}}))
            out.append(sse("response.output_text.delta",
                           {"type": "response.output_text.delta", "item_id": it["id"],
                            "output_index": idx, "content_index": 0, "delta": text}))
            out.append(sse("response.output_text.done",
                           {"type": "response.output_text.done", "item_id": it["id"],
                            "output_index": idx, "content_index": 0, "text": text}))
        elif it["type"] == "custom_tool_call":
            out.append(sse("response.custom_tool_call_input.delta",
                           {"type": "response.custom_tool_call_input.delta", "item_id": it["id"],
                            "output_index": idx, "delta": it["input"]}))
            out.append(sse("response.custom_tool_call_input.done",
                           {"type": "response.custom_tool_call_input.done", "item_id": it["id"],
                            "output_index": idx, "input": it["input"]}))
        elif it["type"] == "function_call":
            out.append(sse("response.function_call_arguments.delta",
                           {"type": "response.function_call_arguments.delta", "item_id": it["id"],
                            "output_index": idx, "delta": it["arguments"]}))
            out.append(sse("response.function_call_arguments.done",
                           {"type": "response.function_call_arguments.done", "item_id": it["id"],
                            "output_index": idx, "arguments": it["arguments"]}))
        out.append(sse("response.output_item.done", {"type": "response.output_item.done",
                                                      "output_index": idx, "item": it}))
        seq += 1
    out.append(sse("response.completed", {"type": "response.completed",
                                           "response": oai_response_obj(body, rid, items, "completed")}))
    return b"".join(out)


# --------------------------------------------------------------------------
# HTTP plumbing
# --------------------------------------------------------------------------

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "mockllm/1"

    def log_message(self, fmt, *a):  # keep stderr quiet unless asked
        if ARGS.verbose:
            sys.stderr.write("mockllm: " + (fmt % a) + "\n")

    def _read_body(self):
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
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
        self.send_header("request-id", "req_mock_" + RUN + "_%06d" % next_id())
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _log(self, body, raw, note=None):
        hdrs = {k: v for k, v in self.headers.items() if k.lower() in LOGGED_HEADERS}
        rec = {"ts": time.time(), "method": self.command, "path": self.path, "headers": hdrs,
               "body": body}
        if body is None and raw:
            rec["raw_len"] = len(raw)
            rec["raw_head"] = raw[:200].decode("latin-1")
        if note:
            rec["note"] = note
        log_record(rec)

    def do_GET(self):
        path = self.path.split("?")[0]
        self._log(None, b"")
        if path.endswith("/responses"):
            # Codex tries the Responses API over WebSocket first (built-in
            # "openai" provider).  426 tells it to fall back to HTTP/SSE.
            self._send(426, {"error": {"message": "mock: websockets not supported",
                                       "type": "invalid_request_error"}})
            return
        if path.endswith("/models"):
            if "anthropic" in (self.headers.get("anthropic-version") or "") or \
                    self.headers.get("x-api-key") is not None:
                self._send(200, {"data": [{"type": "model", "id": "claude-mock",
                                           "display_name": "Mock", "created_at": "2025-01-01T00:00:00Z"}],
                                 "has_more": False, "first_id": "claude-mock", "last_id": "claude-mock"})
            else:
                self._send(200, {"object": "list", "data": [], "models": []})
            return
        self._send(404, {"type": "error", "error": {"type": "not_found_error", "message": "mock: no such path"}})

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_POST(self):
        body, raw = self._read_body()
        path = self.path.split("?")[0]
        self._log(body, raw)
        if body is None:
            body = {}
        if path.endswith("/messages/count_tokens"):
            self._send(200, {"input_tokens": 100})
            return
        if path.endswith("/messages"):
            blocks, stop = anth_plan(body)
            msg = anth_message(body, blocks, stop)
            if body.get("stream"):
                self._send(200, anth_stream(msg), "text/event-stream; charset=utf-8")
            else:
                self._send(200, msg)
            return
        if path.endswith("/responses"):
            items = oai_plan(body)
            if body.get("stream", True):
                self._send(200, oai_stream(body, items), "text/event-stream; charset=utf-8")
            else:
                self._send(200, oai_response_obj(body, "resp_mock_" + RUN + "_%06d" % next_id(), items, "completed"))
            return
        if path.endswith("/chat/completions"):
            self._send(400, {"error": {"message": "mock: chat completions not implemented",
                                       "type": "invalid_request_error"}})
            return
        self._send(404, {"type": "error", "error": {"type": "not_found_error", "message": "mock: no such path"}})


def main():
    global ARGS
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--log", required=True)
    ap.add_argument("--mode", choices=["tool", "text"], default="tool")
    ap.add_argument("--command", default="echo hello > note.txt")
    ap.add_argument("--final-text", default="Done: the note was written.")
    ap.add_argument("--claude-subagent", action="store_true",
                    help="tool mode, Claude: the main agent first calls the Agent tool (sub-agent)")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--tool-name")
    ap.add_argument("--tool-input", default="{}")
    ARGS = ap.parse_args()
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
