"""The scripted agent program: ``python -m cairn.agents.scripted.program --script PATH --role ROLE
--state DIR --workspace DIR``.

It reads ``{"turn": n, "prompt": "..."}`` lines on stdin and, for each, plays the role's next
unplayed turn of the script, printing events as JSON lines on stdout and ending with
``{"type": "turn_completed", "turn": n, "done": bool}`` (done: no turns left). EOF on stdin makes
it exit 0.

Before acting on a prompt it appends ``{"role", "turn", "played_turn", "prompt"}`` to
``DIR/prompts.jsonl`` and advances ``DIR/<role>.cursor`` (``{"played": k}``), both fsynced, so a
continuation dispatch plays the next turn and a turn that killed the process is never replayed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from cairn.agents.scripted.adapter import PROMPTS_FILE, Action, cursor_name, load_script, role_turns
from cairn.errors import BadInput, ExitCode
from cairn.util import durable

OUTPUT_LIMIT = 4000


def emit(record: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


def _clip(data: bytes) -> str:
    text = data.decode("utf-8", "replace")
    return text if len(text) <= OUTPUT_LIMIT else "…" + text[-OUTPUT_LIMIT:]


class Agent:
    def __init__(self, turns: list[list[Action]], role: str, state: Path, workspace: Path) -> None:
        self.turns = turns
        self.role = role
        self.state = state
        self.workspace = workspace
        self.cursor = state / cursor_name(role)

    def played(self) -> int:
        data = durable.read_state_file(self.cursor, "scripted agent cursor")
        if data is None:
            return 0
        try:
            played = json.loads(data)["played"]
        except (ValueError, KeyError, TypeError):
            raise BadInput(f"scripted agent cursor {self.cursor} is corrupt; remove it") from None
        if not isinstance(played, int) or played < 0:
            raise BadInput(f"scripted agent cursor {self.cursor} is corrupt; remove it")
        return played

    def serve(self, stdin: Any) -> int:
        for raw in stdin:
            if not raw.strip():
                continue
            try:
                request = json.loads(raw)
                n, prompt = request["turn"], request["prompt"]
            except (ValueError, KeyError, TypeError):
                print(f"cairn scripted agent: bad request {raw[:200]!r}", file=sys.stderr)
                return ExitCode.BAD_INPUT
            self.turn(n, prompt)
        return ExitCode.OK

    def turn(self, n: int, prompt: str) -> None:
        played = self.played()
        left = played < len(self.turns)
        record = {
            "role": self.role,
            "turn": n,
            "played_turn": played + 1 if left else None,
            "prompt": prompt,
        }
        durable.append_line(self.state / PROMPTS_FILE, json.dumps(record))
        emit({"type": "turn_started", "turn": n})
        usage: dict[str, Any] = {}
        if left:
            durable.atomic_write(self.cursor, json.dumps({"played": played + 1}) + "\n")
            for name, arg in self.turns[played]:
                if name == "usage":
                    for key, value in arg.items():
                        usage[key] = usage.get(key, 0) + value
                else:
                    self.act(n, name, arg)
        done = {"type": "turn_completed", "turn": n, "done": played + 1 >= len(self.turns)}
        emit({**done, "usage": usage} if usage else done)

    def act(self, n: int, name: str, arg: Any) -> None:
        if name in ("write", "append", "edit", "delete"):
            failed = self._change_file(name, arg)
            tool(n, name, arg, failed)
            if failed is None:
                path = arg if name == "delete" else arg["path"]
                emit({"type": "file_changed", "turn": n, "path": path})
        elif name in ("run", "cairn"):
            tool(n, name, arg, self._command(name, arg))
        elif name == "say":
            emit({"type": "message", "turn": n, "text": arg})
        elif name == "deny":
            emit({"type": "tool_use", "turn": n, "name": arg["tool"], "input": arg, "denied": True})
        elif name == "fail":
            # the agent's own error report, then the process ends as a failed agent does
            emit({"type": "error", "turn": n, "text": arg})
            print(arg, file=sys.stderr, flush=True)
            os._exit(1)
        elif name == "plan":
            items = [a if isinstance(a, dict) else {"text": a, "completed": False} for a in arg]
            emit({"type": "plan_updated", "turn": n, "items": items})
        else:
            stop_or_wait(n, name, arg)

    def _change_file(self, name: str, arg: Any) -> dict[str, Any] | None:
        """Write, append, edit or delete a file; the error output, or None when done."""
        if name in ("write", "append"):
            target = self.workspace / arg["path"]
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "w" if name == "write" else "a", encoding="utf-8") as handle:
                handle.write(arg["content"])
            return None
        if name == "edit":
            target = self.workspace / arg["path"]
            try:
                text = target.read_text(encoding="utf-8")
            except OSError as exc:
                return {"error": exc.strerror}
            if arg["old"] not in text:
                return {"error": "old text not found"}
            target.write_text(text.replace(arg["old"], arg["new"], 1), encoding="utf-8")
            return None
        target = self.workspace / arg
        try:
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            else:
                target.unlink()
        except OSError as exc:
            return {"error": exc.strerror}
        return None

    def _command(self, name: str, arg: Any) -> dict[str, Any]:
        """Run a shell command (``run``) or cairn (``cairn``) in the workspace."""
        argv: Any = arg if name == "run" else [sys.executable, "-m", "cairn", *arg]
        done = subprocess.run(
            argv,
            shell=name == "run",
            cwd=self.workspace,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            check=False,
        )
        return {
            "exit_code": done.returncode,
            "stdout": _clip(done.stdout),
            "stderr": _clip(done.stderr),
        }


def tool(n: int, name: str, arg: Any, output: Any = None) -> None:
    event = {"type": "tool_use", "turn": n, "name": name, "input": arg}
    if output is not None:
        event["output"] = output
    emit(event)


def stop_or_wait(n: int, name: str, arg: Any) -> None:
    """``sleep``, ``exit``, ``kill`` (SIGKILL itself) and ``hang`` (optionally ignoring
    SIGTERM, set before the event goes out: whoever sees it may SIGTERM at once)."""
    if name == "hang" and isinstance(arg, dict) and arg.get("ignore_term"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    tool(n, name, arg)
    if name == "sleep":
        time.sleep(arg)
    elif name == "exit":
        os._exit(arg)
    elif name == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif name == "hang":
        while True:
            time.sleep(3600)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cairn.agents.scripted.program")
    parser.add_argument("--script", required=True, type=Path)
    parser.add_argument("--role", required=True)
    parser.add_argument("--state", required=True, type=Path)
    parser.add_argument("--workspace", required=True, type=Path)
    args = parser.parse_args(argv)
    try:
        turns = role_turns(load_script(args.script), args.role, args.script)
        durable.ensure_dir(args.state)
        agent = Agent(turns, args.role, args.state, args.workspace)
        return agent.serve(sys.stdin.buffer)
    except BadInput as exc:
        print(f"cairn scripted agent: {exc}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    except BrokenPipeError:
        return ExitCode.FAILURE


if __name__ == "__main__":
    sys.exit(main())
