"""The shared remote as the user's repository names it: its URL, and the branch new ticket
branches start from. Plain git (no temporalio): the command line asks before it connects."""

from __future__ import annotations

from pathlib import Path

from cairn.errors import BadInput
from cairn.git import Repo


def url_of(repo: Repo, name: str) -> str:
    """The URL of the remote ``name`` (``[fleet] remote``); a relative path made absolute."""
    found = repo.git.run(["remote", "get-url", "--", name], check=False)
    if not found.ok or not found.text:
        raise BadInput(
            f"[fleet] remote {name!r} is not a remote of {repo.toplevel}; add the shared "
            f"repository every worker reaches: git remote add {name} <url>"
        )
    url = found.text
    local = Path(url) if "://" not in url and ":" not in url.split("/")[0] else None
    if local is not None and not local.is_absolute():
        url = str((repo.toplevel / local).resolve())
    return url


def base_of(repo: Repo, remote: str, configured: str | None) -> str:
    """``[fleet] base`` (which the remote must have), else the remote's default branch (its
    HEAD), else the branch checked out here."""
    if configured is not None:
        listed = repo.git.run(["ls-remote", "--", remote, f"refs/heads/{configured}"], check=False)
        if not listed.text:
            raise BadInput(
                f"[fleet] base {configured!r} is not a branch of {remote}; push it there or fix "
                "[fleet] base in cairn.toml"
            )
        return configured
    found = repo.git.run(["ls-remote", "--symref", "--", remote, "HEAD"], check=False)
    for line in found.text.splitlines():
        if line.startswith("ref: refs/heads/"):
            return line.split()[1].removeprefix("refs/heads/")
    branch = repo.current_branch()
    if branch is None:
        raise BadInput(f"{remote} has no default branch and HEAD is detached; check out one")
    return branch


def fleet_key(repo: Repo, configured: str | None, name: str, base: str | None) -> str:
    """What every ticket workflow id of this repository starts with, the same in every clone
    however it spells the remote: ``[fleet] id``, else the repository's root commit (the one
    the base branch's first parents lead to: one, even when merges brought in other roots)."""
    if configured is not None:
        return configured
    if repo.git.run(["rev-parse", "--is-shallow-repository"], check=False).text == "true":
        raise BadInput(
            f"{repo.toplevel} is a shallow clone, so its root commit is unknown; set [fleet] id "
            "in cairn.toml or git fetch --unshallow"
        )
    tips = [f"refs/remotes/{name}/{base}", f"refs/heads/{base}"] if base else []
    for tip in (*tips, f"refs/remotes/{name}/HEAD", "HEAD"):
        found = repo.git.run(
            ["rev-list", "--first-parent", "--max-parents=0", tip, "--"], check=False
        )
        if found.ok and found.text:
            return found.text.split()[-1][:16]
    raise BadInput(
        f"{repo.toplevel} has no commit to name the fleet by; git fetch {name}, or set "
        "[fleet] id in cairn.toml"
    )
