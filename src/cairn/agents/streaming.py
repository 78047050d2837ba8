"""A dispatch run as one or more invocations of an agent CLI that streams JSON lines on stdout
(Claude Code, Codex): the loop, interrupts and the result, shared by both adapters.

Each invocation runs until the agent stops; if it stopped cleanly with work left and turns to
spare, the next invocation continues the same agent session with the next prompt.
"""

from __future__ import annotations

import subprocess
from abc import abstractmethod
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from cairn.agents import process
from cairn.agents.base import DispatchRequest, Event, Reason, Result, Session, next_turn


class Stream(Protocol):
    """What one invocation's stdout has said so far."""

    turns: int
    session_id: str | None
    last_text: str | None

    def feed(self, line: str) -> list[Event]: ...


class StreamingSession(Session):
    def __init__(self, request: DispatchRequest, argv: list[str]) -> None:
        self.request = request
        self.argv = argv
        self.result: Result | None = None
        self._interrupt: Reason | None = None
        self._grace = 0.0
        self._child: process.Child | None = None
        self._used = 0
        self._session_id = request.session_id
        self._final: str | None = None
        self._usage: dict[str, Any] = {}

    @property
    def pid(self) -> int | None:
        child = self._child
        return child.pid if child is not None else None

    def interrupt(self, reason: Reason, grace: float) -> None:
        if self.result is not None:
            return
        if self._interrupt is None:
            self._interrupt = reason
        self._grace = grace
        child = self._child
        if child is not None:
            child.terminate(grace)

    def events(self) -> Iterator[Event]:
        if self.result is not None:
            return
        try:
            yield from self._run()
        finally:
            if self._child is not None:
                self._child.close()

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
        reason: Reason,
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
