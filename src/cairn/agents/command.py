"""The ``command`` agent kind: any program, one invocation per turn.

``agent.command`` is a string (split with ``shlex.split``) or a list of arguments. When an
argument contains ``{prompt}`` it is replaced by the turn's prompt; otherwise the prompt is written
to the program's stdin, which is then closed. The program runs in the workspace, in its own
process group, with ``os.environ`` + the request's env (the orchestrator's ``CAIRN_RUN_DIR``,
``CAIRN_TICKET``, ``CAIRN_TASK``) + ``CAIRN_TURN`` (the turn number, 1-based).

Exit 0 ends the turn (``turn_completed``) and the next prompt is asked for; a non-zero exit ends
the dispatch as ``error`` (with ``exit_code``), a signal as ``crashed``; what the end of its
stderr says is the result's ``failure`` (a usage or rate limit, refused credentials:
``cairn.agents.limits``). Every non-empty stdout line is relayed as a ``message`` event; the
last one of the last turn is the final message.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

from cairn.agents import limits, process
from cairn.agents.base import (
    Adapter,
    Dispatch,
    DispatchRequest,
    Event,
    next_turn,
)
from cairn.errors import BadInput
from cairn.terms import ENV_TURN

PLACEHOLDER = "{prompt}"
STDIN_JOIN = 1.0


def command_argv(command: str | list[str] | None) -> list[str]:
    if command is None:
        raise BadInput("agent kind command needs agent.command")
    if isinstance(command, str):
        try:
            argv = shlex.split(command)
        except ValueError as exc:
            raise BadInput(f"agent.command {command!r} cannot be split: {exc}") from None
    elif isinstance(command, list | tuple) and all(isinstance(a, str) for a in command):
        argv = list(command)
    else:
        raise BadInput("agent.command must be a string or a list of strings")
    if not argv:
        raise BadInput("agent.command is empty")
    return argv


class CommandAdapter(Adapter):
    kind = "command"
    reports_cost = False  # nothing at all

    def preflight(self, request: DispatchRequest) -> None:
        argv = command_argv(request.command)
        if not Path(request.workspace).is_dir():
            raise BadInput(f"workspace {request.workspace} is not a directory")
        program = argv[0]
        if "/" not in program and PLACEHOLDER not in program:
            path = {**os.environ, **request.env}.get("PATH", os.defpath)
            if shutil.which(program, path=path) is None:
                raise BadInput(f"agent command {program!r} is not found on PATH")

    def start(self, request: DispatchRequest) -> Dispatch:
        self.preflight(request)
        return CommandDispatch(request, command_argv(request.command))


class CommandDispatch(process.ChildDispatch):
    """A running dispatch (one agent invocation for a role, possibly several turns) of a
    command: one run of the program per turn."""

    def _run(self) -> Iterator[Event]:
        uses_arg = any(PLACEHOLDER in arg for arg in self.argv)
        n = 1
        while True:
            prompt, end = next_turn(self.request, n, lambda: self._interrupt)
            if prompt is None:
                self._set(end or "completed")
                return
            argv = (
                [arg.replace(PLACEHOLDER, prompt) for arg in self.argv] if uses_arg else self.argv
            )
            if self._child is not None:
                self._child.close()
                self._child = None
            try:
                child = process.Child(
                    argv,
                    cwd=Path(self.request.workspace),
                    env={**self.request.env, ENV_TURN: str(n)},
                    stdin=subprocess.DEVNULL if uses_arg else subprocess.PIPE,
                )
            except OSError as exc:
                self._set("error", detail=f"cannot run {argv[0]!r}: {exc.strerror or exc}")
                return
            self._child = child
            self._turns = n
            if self._interrupt is not None:  # interrupted while it was being started
                child.terminate(self._grace)
            yield Event("turn_started", n)
            writer = None
            if not uses_arg:
                writer = threading.Thread(target=_feed, args=(child, prompt), daemon=True)
                writer.start()
            last: str | None = None
            for line in child.lines():
                self._keep(json.dumps({"type": "output", "turn": n, "text": line}))
                if line.strip():
                    last = line.rstrip("\r")
                    yield Event("message", n, {"text": last})
            returncode = child.wait()
            assert returncode is not None
            if writer is not None:
                writer.join(STDIN_JOIN)
            self._final = last
            reason = process.classify(returncode, self._interrupt)
            if reason is not None:
                detail = failure = None
                if self._interrupt is None:
                    detail = child.with_stderr(f"{argv[0]} {process.describe_exit(returncode)}")
                    failure = limits.classify(child.stderr_tail() or detail)
                    failure = failure if reason == "error" or failure.limit else None
                code = returncode if returncode > 0 else None
                self._set(reason, exit_code=code, detail=detail, failure=failure)
                return
            yield Event("turn_completed", n, {"exit_code": 0})
            n += 1


def _feed(child: process.Child, prompt: str) -> None:
    """Write the prompt to stdin and close it (in a thread: a program that never reads its
    stdin must not block the reading of its stdout)."""
    child.send(prompt.encode("utf-8"))
    child.close_stdin()
