"""``cairn demo``: a self-contained tour of the snapshot engine on a throwaway repository."""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from cairn.errors import BadInput
from cairn.output import console, guarded

_PROJECT = {
    "README.md": "# calc\nA tiny calculator.\n",
    "src/calc.py": "def add(a, b):\n    return a + b\n",
    ".gitignore": "build/\n",
    "cairn.toml": '[snapshot]\nmax_new_file_bytes = "1MiB"\n',
}


def _fingerprint(repo: Path) -> str:
    """Hash of what a snapshot must never change: HEAD, the branch, and the index file."""
    digest = hashlib.sha256()
    for rel in ("HEAD", "refs/heads/main", "index"):
        path = repo / ".git" / rel
        digest.update(path.read_bytes() if path.exists() else b"-")
    return digest.hexdigest()[:16]


def _write(root: Path, rel: str, text: str | bytes) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)


@guarded
def demo(
    directory: Annotated[
        Path | None, typer.Option("--dir", help="An empty directory to use (default: a new one).")
    ] = None,
) -> None:
    """Show a cut-off agent's work surviving: snapshot, list, and restore into a new directory."""
    from cairn import wip
    from cairn.git import base_runner

    if directory is None:
        directory = Path(tempfile.mkdtemp(prefix="cairn-demo-"))
    elif directory.exists() and any(directory.iterdir()):
        raise BadInput(f"{directory} is not empty; pass --dir a new or empty directory")
    repo = directory / "workspace"
    repo.mkdir(parents=True)
    git = base_runner(repo)
    git.run(["init", "-q", "-b", "main"])
    for rel, text in _PROJECT.items():
        _write(repo, rel, text)
    git.run(["add", "-A"])
    git.run(["commit", "-q", "-m", "calc: first version"])
    console.print(f"1. A project at {repo}, one commit on main.")

    _write(repo, "src/calc.py", _PROJECT["src/calc.py"] + "\ndef sub(a, b):\n    return a - b\n")
    _write(repo, "src/parser.py", "def parse(text):\n    return text.split()\n")
    git.run(["add", "src/parser.py"])
    _write(repo, "src/cli.py", "# brand-new, never added to git\nprint('calc')\n")
    _write(repo, "build/calc.bin", b"\0" * 1024)
    _write(repo, "data/fixture.bin", b"\1" * (2 * 1024 * 1024))
    console.print(
        "2. An agent edits src/calc.py, stages src/parser.py, creates src/cli.py (untracked),\n"
        "   a build output (ignored) and a 2 MiB data file (over this repo's 1 MiB cap)."
    )

    before = _fingerprint(repo)
    result = wip.save(repo, reason="turn cap reached")
    console.print(f"3. The turn cap hits. cairn wip save: {result.summary}")
    for item in result.skipped:
        console.print(f"     skipped {item.path}: {item.reason}")
    same = _fingerprint(repo) == before
    console.print(f"   HEAD, branch and index untouched: {'yes' if same else 'NO'}")

    recovered = directory / "recovered"
    restored = wip.restore(repo, result.ticket, to=recovered)
    console.print(
        f"4. The workspace is lost. cairn wip restore main --to {recovered}: "
        f"{len(restored.written)} files back"
    )
    for rel in ("src/calc.py", "src/parser.py", "src/cli.py"):
        ok = (recovered / rel).read_bytes() == (repo / rel).read_bytes()
        console.print(f"     {rel}: {'identical' if ok else 'DIFFERENT'}")

    console.print("5. Look around:")
    console.print(f"     cd {repo}")
    console.print("     cairn wip list; cairn wip show main; cairn wip diff main")
    if not same:
        raise typer.Exit(1)
