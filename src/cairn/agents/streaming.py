"""A dispatch run as one or more invocations of an agent CLI that streams JSON lines on stdout
(Claude Code, Codex): the loop, interrupts and the result, shared by both adapters.

Each invocation runs until the agent stops; if it stopped cleanly with work left and turns to
spare, the next invocation continues the same agent session with the next prompt.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from abc import abstractmethod
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar, Protocol

from cairn.agents import process, versions
from cairn.agents.base import (
    Adapter,
    Dispatch,
    DispatchRequest,
    Event,
    Result,
    next_turn,
)
from cairn.errors import BadInput
from cairn.terms import StopReason


class Stream(Protocol):
    """What one invocation's stdout has said so far."""

    turns: int
    session_id: str | None
    last_text: str | None

    def feed(self, line: str) -> list[Event]: ...


class StreamingAdapter(Adapter):
    """An agent CLI on PATH at a version cairn reads; its dispatches stream JSON lines."""

    product: ClassVar[str]
    install: ClassVar[str]
    minimum_version: ClassVar[tuple[int, int, int]]

    @abstractmethod
    def program(self, command: str | list[str] | None) -> list[str]:
        """The program and the user's options, from ``agent.command``."""

    @abstractmethod
    def session(self, request: DispatchRequest, argv: list[str]) -> Dispatch: ...

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

    def start(self, request: DispatchRequest) -> Dispatch:
        self.preflight(request)
        return self.session(request, self.program(request.command))


class StreamingDispatch(process.ChildDispatch):
    def __init__(self, request: DispatchRequest, argv: list[str]) -> None:
        super().__init__(request, argv)
        self._used = 0
        self._session_id = request.session_id
        self._final: str | None = None
        self._usage: dict[str, Any] = {}

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
            prompt, end = next_turn(self.request, self._used + 1, lambda: self._interrupt)
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
                for event in stream.feed(line):
                    yield event
                    self._seen(event, child)
            returncode = child.wait()
            assert returncode is not None
            self._used += stream.turns
            self._session_id = stream.session_id or self._session_id
            self._final = stream.last_text or self._final
            if not self._continue(stream, returncode, child):
                return

    def _set(
        self,
        reason: StopReason,
        exit_code: int | None = None,
        detail: str | None = None,
        stderr: str | None = None,
    ) -> None:
        if stderr:
            last = stderr.splitlines()[-1]
            detail = f"{detail}: {last}" if detail else last
        self.result = Result(
            reason=reason,
            num_turns=self._used,
            final_message=self._final,
            session_id=self._session_id,
            exit_code=exit_code,
            usage=self._usage,
            detail=detail,
        )
