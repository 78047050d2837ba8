"""What a git command returned (``GitResult``) and the line of its stderr that names a problem.
No ``typing`` at run time (``cairn.util.tuples``): the save's early ``git status``
(``cairn.git.status``) is started before the rest of cairn is imported."""

from __future__ import annotations

from cairn.util.tuples import NamedTuple


class GitResult(NamedTuple):
    args: list[str]
    returncode: int
    stdout: bytes
    stderr: bytes

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8", "surrogateescape").strip()

    @property
    def error_text(self) -> str:
        return self.stderr.decode("utf-8", "replace").strip()

    @property
    def error_line(self) -> str:
        """The line of stderr that names the problem (git ends with hints and usage notes)."""
        return telling_line(self.error_text) or f"exit status {self.returncode}"


def telling_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for prefix in ("fatal:", "error:", "! ["):
        for line in lines:
            if line.startswith(prefix):
                return line
    return next((line for line in lines if not line.startswith("hint:")), "")
