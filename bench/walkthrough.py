"""Runs the walkthrough of docs/scale-out.md ("From a fresh machine to two workers finishing a
queue") as written, in a scratch ``$HOME``: its code blocks in order, in one bash session, with
two changes only — cairn and ``temporal`` come from this interpreter's environment instead of a
new one, and the dev server listens on a free port instead of 7233. Then a retry of a completed
ticket must be refused (exit 2). Exit 0 when the queue finished (``fleet: exit 0``).

    python bench/walkthrough.py
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs" / "scale-out.md"
HEADING = "## From a fresh machine to two workers finishing a queue"


def blocks() -> list[str]:
    text = DOCS.read_text()
    section = text[text.index(HEADING) :]
    section = section[: section.index("\n## ", len(HEADING))]
    found = re.findall(r"\n```\n(.*?)\n```\n", section, re.S)
    return found[:5]  # install and server, remote, agent and config, queue, workers and fleet


def main() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    found = blocks()
    first = found[0].splitlines()
    assert first[0].startswith("python3 -m venv") and first[1].startswith("export PATH")
    found[0] = "\n".join([f"export PATH={Path(sys.executable).parent}:$PATH", *first[2:]])
    script = "\n".join(["set -ex", *found]).replace("7233", str(port))
    script += "\ncairn fleet retry APP-1 && exit 9 || echo retry refused\nkill %1 %2 %3\nwait\n"
    with tempfile.TemporaryDirectory(prefix="cairn-walkthrough-") as home:
        identity = {"GIT_AUTHOR_NAME": "you", "GIT_AUTHOR_EMAIL": "you@example.invalid"}
        identity |= {"GIT_COMMITTER_NAME": "you", "GIT_COMMITTER_EMAIL": "you@example.invalid"}
        env = {**os.environ, "HOME": home, **identity}
        done = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True)
    print(done.stdout)
    print(done.stderr[-3000:], file=sys.stderr)
    ok = done.returncode == 0 and "fleet: exit 0" in done.stdout and "retry refused" in done.stdout
    print("walkthrough:", "ok" if ok else f"FAILED (exit {done.returncode})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
