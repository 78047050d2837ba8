"""A dispatch run as one or more invocations of an agent CLI that streams JSON lines on stdout
(Claude Code, Codex): the adapter, the loop, interrupts and the result, shared by both.

Each invocation runs until the agent stops; if it stopped cleanly with work left and turns to
spare, the next invocation continues the same agent session with the next prompt.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from abc import abstractmethod
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar, Protocol

from cairn.agents import process, versions
from cairn.agents.base import Adapter, DispatchRequest, Event, next_turn
from cairn.errors import BadInput


class Stream(Protocol):
    """What one invocation's stdout has said so far."""

    turns: int
    session_id: str | None
    last_text: str | None

    def feed(self, line: str) -> list[Event]: ...


class StreamingAdapter(Adapter):
    """An agent CLI on PATH at a version cairn reads; its dispatches stream JSON lines.

    A kind is its class attributes: the product, how to install it, the oldest version cairn
    reads, the default command and the dispatch class that reads its stream.
    """

    product: ClassVar[str]
    install: ClassVar[str]
    minimum_version: ClassVar[tuple[int, int, int]]
    default_command: ClassVar[tuple[str, ...]]
    dispatch_type: ClassVar[type[StreamingDispatch]]

    def program(self, command: str | list[str] | None) -> list[str]:
        """The program and the user's options, from ``agent.command``."""
        if command is None:
            return list(self.default_command)
        argv = shlex.split(command) if isinstance(command, str) else list(command)
        if not argv or not all(isinstance(a, str) for a in argv):
            raise BadInput(
                f"agent.command for kind {self.kind} must be a program and its arguments"
            )
        return argv

    def preflight(self, request: DispatchRequest) -> None:
        argv = self.program(request.command)
        if not Path(request.workspace).is_dir():
            raise BadInput(f"workspace {request.workspace} is not a directory")
        path = {**os.environ, **request.env}.get("PATH", os.defpath)
        if "/" not in argv[0] and shutil.which(argv[0], path=path) is None:
            raise BadInput(
                f"{argv[0]!r} is not on PATH; install {self.product} ({self.install}) "
                "or set agent.command"
            )
        versions.require(argv[0], request.env, self.product, self.minimum_version)

    def start(self, request: DispatchRequest) -> StreamingDispatch:
        self.preflight(request)
        return self.dispatch_type(request, self.program(request.command))


class StreamingDispatch(process.ChildDispatch):
    """A running dispatch (one agent invocation for a role, possibly several turns) of a
    streaming agent CLI: one child process per invocation of the same agent session."""

    def __init__(self, request: DispatchRequest, argv: list[str]) -> None:
        super().__init__(request, argv)
        self._session_id = request.session_id

    @abstractmethod
    def _invocation(self, prompt: str) -> list[str]: ...

    @abstractmethod
    def _stream(self) -> Stream: ...

    @abstractmethod
    def _continue(self, stream: Any, returncode: int, child: process.Child) -> bool:
        """After an invocation: True to run another one; otherwise set the result."""

    def _env(self) -> dict[str, str]:
        return dict(self.request.env)

    def _seen(self, event: Event, child: process.Child) -> None:
        """Called for every event as it arrives (Codex enforces its turn cap here)."""

    def _run(self) -> Iterator[Event]:
        while True:
            prompt, end = next_turn(self.request, self._turns + 1, lambda: self._interrupt)
            if prompt is None:
                self._set(end or "completed")
                return
            if self._child is not None:
                self._child.close()
            try:
                child = process.Child(
                    self._invocation(prompt),
                    cwd=Path(self.request.workspace),
                    env=self._env(),
                    stdin=subprocess.DEVNULL,
                )
            except OSError as exc:
                self._set("error", detail=f"cannot run {self.argv[0]!r}: {exc.strerror or exc}")
                return
            self._child = child
            if self._interrupt is not None:
                child.terminate(self._grace)
            stream = self._stream()
            for line in child.lines():
                self._keep(line)
                for event in stream.feed(line):
                    yield event
                    self._seen(event, child)
            returncode = child.wait()
            assert returncode is not None
            self._turns += stream.turns
            self._session_id = stream.session_id or self._session_id
            self._final = stream.last_text or self._final
            if not self._continue(stream, returncode, child):
                return
