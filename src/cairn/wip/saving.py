"""``save``: snapshot the work tree into ``refs/cairn/wip/<ticket>`` without touching it.

Pipeline (see docs/snapshots.md): ``status`` reading the real index in place → choose untracked
files → hash the changed files the stat cache does not know and write the trees on their paths
(HEAD's tree plus edits) → ``commit-tree`` → ``update-ref`` with the old value
(compare-and-swap; ``wip/recording.py``); the trees are ``cairn.wip.preparing``'s. The user's
index is only ever read.

A save that the no-op proof (``cairn.wip.proof``) answers needs none of that: this module
imports, at its top, only what the proof needs (the early ``git status``, the proof), and the
engine (the config's validation, the records, the scan, the tree building) when a save goes on
to build trees.
"""

from __future__ import annotations

import os
import time

from cairn.defaults import CUTOFF_TIMEOUT_MS
from cairn.git.status import start_early
from cairn.wip import proof

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from pathlib import Path

    from cairn.config.records import Config
    from cairn.git import Repo
    from cairn.git.discovery import Found
    from cairn.git.status import Early
    from cairn.wip.models import SaveResult
    from cairn.wip.proof import Proof
    from cairn.wip.recording import Prepared


def save(
    workspace: Path | str = ".",
    ticket: str | None = None,
    reason: str = "manual",
    timeout: float | None = None,
    run_id: str | None = None,
    config: Config | None = None,
    mirror_branch: bool | None = None,
    early: Early | None = None,
) -> SaveResult:
    """Snapshot ``workspace``; ``timeout`` seconds (default ``agent.cutoff_timeout_ms``).

    ``git status``, the bulk of a save on a big repository, starts first with the repository's
    discovery (or both were started by the caller: ``early``, from
    ``cairn.git.status.start_early(workspace)``, which the save then owns) and runs while the
    config is read and the stat cache loaded.

    When nothing changed since the last save with the same ``ticket`` and ``run_id``, the
    no-op proof (``cairn.wip.proof``) answers from ``git status`` alone.
    """
    started = time.monotonic()
    done = save_or_proof(workspace, ticket, reason, timeout, run_id, config, mirror_branch, early)
    if isinstance(done, proof.Proof):
        return proven_result(done, reason, int((time.monotonic() - started) * 1000))
    return done


def save_or_proof(
    workspace: Path | str = ".",
    ticket: str | None = None,
    reason: str = "manual",
    timeout: float | None = None,
    run_id: str | None = None,
    config: Config | None = None,
    mirror_branch: bool | None = None,
    early: Early | None = None,
) -> SaveResult | Proof:
    """``save``, except that a save the no-op proof answers returns the proof (what its result
    is made of, ``proven_result``): the command line prints its one line and the Stop hook
    nothing, and neither loads the records library. Before the proof is asked, a save loads
    the config only when a file holds one, and no more of the engine than that."""
    from cairn.errors import SaveTimeout
    from cairn.git.process import Deadline

    started = time.monotonic()
    where = os.fspath(workspace) or "."
    if early is not None and early.workspace != where:
        early.abandon()  # started for another work tree
        early = None
    if early is None:
        early = start_early(where)
    status = early.status
    try:
        warnings: list[str] = []
        provable = config is None and status is not None  # the proof knows the config's files
        found = _found(early) if provable else None  # None: Repo.discover says what is wrong
        repo = None
        if found is None:
            repo = _discover(workspace, early)
            found = paths_of(repo)
        if config is None and proof.config_present(found.toplevel):
            config = _load_config(found.toplevel, warnings)
        if ticket is not None or run_id is not None:
            from cairn import tickets

            for name in (ticket, run_id):
                if name is not None:
                    tickets.validate(name)
        budget = config.agent.cutoff_timeout_ms if config is not None else CUTOFF_TIMEOUT_MS
        seconds = timeout if timeout is not None else budget / 1000
        deadline = Deadline(seconds)
        try:
            out = status.result(deadline=deadline).stdout if provable and status else b""
            key = proof.key(found, out, ticket, run_id) if provable else None  # once a save
            proven = proof.holds(found, key, ticket, run_id) if not warnings else None
            if proven is not None:
                return proven
            from cairn.config.records import Config
            from cairn.wip.meta import clean_reason
            from cairn.wip.preparing import prepare
            from cairn.wip.recording import record
            from cairn.wip.scratch import scratch_dir

            if repo is None:
                repo = _discover(workspace, early)  # the discovery's answer, read once
            if config is None:
                config = Config()  # no file holds one
            if mirror_branch is None:
                mirror_branch = config.agent.preserve_uncommitted_work_branch
            with scratch_dir(repo.state_root(), "save", warnings) as scratch:
                prepared = prepare(repo, config, scratch, ticket, deadline, status=status)
                result = record(
                    prepared, clean_reason(reason), run_id, deadline, mirror_branch=mirror_branch
                )
                if prepared.cache is not None and result.commit:
                    prepared.cache.save(prepared.ref, result.commit)
            if provable:
                keep_proof(found, key, ticket, run_id, prepared, result, warnings)
        except SaveTimeout as exc:
            raise SaveTimeout(
                f"snapshot abandoned after {seconds * 1000:.0f} ms ({exc}); no ref was moved; "
                "raise agent.cutoff_timeout_ms or pass --timeout-ms"
            ) from None
    finally:
        early.abandon()  # after an early error; nothing to do once their results were read
    import msgspec

    elapsed = int((time.monotonic() - started) * 1000)
    return msgspec.structs.replace(
        result, elapsed_ms=elapsed, warnings=[*warnings, *result.warnings]
    )


def _found(early: Early) -> Found | None:
    """The work tree's paths from the discovery ``start_early`` started; None when it did not
    start or did not find a work tree."""
    from cairn.git.discovery import parse

    if early.discovery is None:
        return None
    result = early.discovery.result(check=False)
    return parse(result.returncode, result.stdout)


def _discover(workspace: Path | str, early: Early) -> Repo:
    from cairn.git import Repo

    return Repo.discover(workspace, early.discovery)


def _load_config(toplevel: str, warnings: list[str]) -> Config:
    from pathlib import Path

    from cairn.config import load

    return load(Path(toplevel), warnings)


def paths_of(repo: Repo) -> Found:
    from cairn.git.discovery import Found

    return Found(
        os.fspath(repo.toplevel),
        os.fspath(repo.git_dir),
        os.fspath(repo.common_dir),
        os.fspath(repo.index_path),
        repo.object_format,
    )


def proven_result(proven: Proof, reason: str, elapsed_ms: int = 0) -> SaveResult:
    """The result of a save the proof showed would record nothing."""
    from cairn.wip.meta import clean_reason
    from cairn.wip.models import SaveResult

    return SaveResult(
        ref=proven.ref,
        commit=proven.commit,
        created=False,
        base=proven.base,
        branch=proven.branch,
        files_changed=proven.files_changed,
        skipped=[],
        elapsed_ms=elapsed_ms,
        ticket=proven.ticket,
        reason=clean_reason(reason),
        conflicted=[],
        previous=None,
        warnings=[],
    )


def keep_proof(
    found: Found,
    key: proof.Key | None,
    ticket: str | None,
    run_id: str | None,
    prepared: Prepared,
    result: SaveResult,
    warnings: list[str],
) -> None:
    """Write the proof of this save for the next one, when its answer is one the proof can
    give again (see ``cairn.wip.proof``)."""
    if prepared.cache is None or result.skipped or result.conflicted or result.warnings or warnings:
        return
    kept = proof.Proof(
        key="",
        asked=ticket,
        run=run_id,
        ref=result.ref,
        commit=result.commit,
        ticket=result.ticket,
        files_changed=result.files_changed,
        base=result.base,
        branch=result.branch,
    )
    proof.write(found, key, prepared.cache.stamp, kept)
