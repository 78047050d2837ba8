"""Landing fleet tickets: ``POST /api/v1/tickets/{id}/land`` and ``cairn fleet land TICKET…``
merge each ticket's branch ``cairn/<ticket>`` into the fleet's base branch (``[fleet] base``,
else the main work tree's branch), in the order asked, each on top of the one before.

Every ticket is checked first (``check``): an unknown one is refused 404, one that is not
landable 409 (``Refused``), and then nothing is changed. A ticket is landable when it is
``approved``, or ``completed`` with no open finding (none ``pending`` or ``NOT_FIXED`` in its
run's change summary), with no request of a person's still pending for it.

The git is ``cairn.fleet.landmerge``'s: a fast-forward when the base is behind the branch, else
a merge commit of both tips; never a forced move. A branch that conflicts with the base is not
landed: its ticket gets a fix round (``cairn.fleet.fixround``, why ``land``) whose one finding
``L1`` asks its agent to bring the branch up to date with the base and resolve the conflicts
(the files named), and a wish to land is left in ``<state root>/fleet/landing/<ticket>.json``:
when the fix round's run ends ``completed``, the supervisor lands it (``after_fix_round``).

Every land is journaled in the ticket's latest run as ``landed``, with who asked it
(``cli``, ``dashboard``, ``api``, or ``fleet`` for a land after a fix round).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

from cairn import summary
from cairn.config.records import Config
from cairn.errors import BadInput, GitError, Refused
from cairn.fleet import fixround, fleetcontrol, fleetstate, landmerge, landpull
from cairn.fleet.fleetstate import FleetTicket
from cairn.fleet.github_api import GitHubAPI, GitHubError
from cairn.fleet.gitworktree import branch_tip
from cairn.fleet.retry import base_of
from cairn.git import Repo
from cairn.state import runstate
from cairn.state.layout import Layout
from cairn.state.runstate import RunRef
from cairn.terms import ASKERS, Asker
from cairn.util import clock, durable

WISHES = "landing"  # <state root>/fleet/landing/<ticket>.json: lands once its fix round passes
LOCK = "land.lock"  # one land at a time: each on top of the one before
WHY = "land"  # a fix round asked by a land that conflicted
FINDING = "L1"
OPEN = ("pending", "NOT_FIXED")
READ_LIMIT = 4096


class Target(NamedTuple):
    record: FleetTicket
    base: str  # the base branch's short name
    branch: str  # cairn/<ticket>
    pull: dict[str, Any] | None = None  # the github tracker: its pull request, merged there


def refusal(layout: Layout, record: FleetTicket) -> str | None:
    """Why ``record``'s ticket cannot land now, or None."""
    ticket, state = record.ticket, record.state
    if state not in ("approved", "completed"):
        said = state.replace("_", " ")
        if state in ("queued", "running", "retrying", "waiting", "paused", "budget"):
            fix = "wait until its run is completed, then approve or land it"
        elif state == "needs_review":
            fix = f"review it (cairn review {ticket} --approve, or --request-changes)"
        else:
            fix = f"cairn fleet retry {ticket} lets its run finish first"
        return f"ticket {ticket} is {said}; only an approved or completed ticket lands; {fix}"
    if any(r.ticket == ticket for r in fleetcontrol.pending(layout, [])):
        return f"ticket {ticket} has a request still pending; wait until it is carried out"
    if state == "completed":
        found = open_findings(layout, ticket)
        if found:
            return (
                f"ticket {ticket} is completed with open findings ({', '.join(found)}); "
                f"approve it (cairn review {ticket} --approve) or ask for a fix round"
            )
    return None


def open_findings(layout: Layout, ticket: str) -> list[str]:
    """The findings of the ticket's latest run not answered FIXED or ALREADY_RESOLVED."""
    run_id = layout.latest_run(ticket)
    path = RunRef(layout, ticket, run_id).summary_path() if run_id is not None else None
    loaded = summary.load(path) if path is not None else None
    return [f.id for f in loaded.findings if f.status in OPEN] if loaded is not None else []


def check(
    repo: Repo, config: Config, layout: Layout, asked: list[str], api: GitHubAPI | None = None
) -> list[Target]:
    """Every ticket asked, checked, in order (each once); ``Refused`` at the first problem.
    With ``api`` (the github tracker) each ticket's pull request is checked instead of the
    local base."""
    base = _remote_base(api) if api is not None else base_of(repo, config)
    found = []
    for ticket in dict.fromkeys(asked):
        record, branch = _checked(repo, layout, ticket)
        try:
            pull = landpull.find(api, ticket, branch) if api is not None else None
        except BadInput as exc:
            raise Refused(409, "not_landable", str(exc)) from None
        found.append(Target(record, base, branch, pull))
    if api is None:
        _check_base(repo, base)
    return found


def _checked(repo: Repo, layout: Layout, ticket: str) -> tuple[FleetTicket, str]:
    """The ticket's record and branch, when it can land; ``Refused`` when it cannot."""
    record = fleetstate.read(layout, ticket)
    if record is None:
        known = [r.ticket for r in fleetstate.listing(layout, [])]
        raise Refused(404, "unknown_ticket", str(fleetstate.unknown([ticket], known)))
    why = refusal(layout, record)
    if why is not None:
        raise Refused(409, "not_landable", why)
    branch = record.branch or f"cairn/{ticket}"
    if branch_tip(repo, branch) is None:
        raise Refused(409, "not_landable", f"ticket {ticket} has no branch {branch} to land")
    return record, branch


def _check_base(repo: Repo, base: str) -> None:
    if base == "HEAD":
        raise Refused(
            409,
            "no_base",
            "the fleet has no base branch to land on: the main work tree's HEAD is detached; "
            'set [fleet] base (e.g. base = "main") in cairn.toml',
        )
    if branch_tip(repo, base) is None:
        raise Refused(
            409, "no_base", f"the fleet's base branch {base} does not exist; set [fleet] base"
        )
    tree = landmerge.checked_out(repo, f"refs/heads/{base}")
    changed = landmerge.dirty(tree) if tree is not None else []
    if changed:
        raise Refused(
            409,
            "base_dirty",
            f"{base} is checked out in {tree} with uncommitted changes ({', '.join(changed[:5])}); "
            "commit or stash them there, then land again",
        )


def land(
    repo: Repo, config: Config, layout: Layout, asked: list[str], by: Asker
) -> list[dict[str, Any]]:
    """Check every ticket, then land each in order: what was done to each, as the API answers
    it (``landed`` true, or a conflict and its fix round)."""
    for ticket in asked:  # an unknown one before anything is written (even the lock file)
        _checked(repo, layout, ticket)
    api = None
    if config.fleet.tracker == "github":
        try:
            api = landpull.open_api(config)
        except BadInput as exc:
            raise Refused(409, "not_landable", str(exc)) from None
    try:
        with durable.locked(layout.fleet_dir / LOCK):
            targets = check(repo, config, layout, asked, api)
            return [_one(repo, config, layout, target, by, api) for target in targets]
    finally:
        if api is not None:
            api.close()


def _remote_base(api: GitHubAPI) -> str:
    try:
        return api.default_branch()
    except GitHubError as exc:
        raise Refused(409, "no_base", f"GitHub's default branch cannot be read ({exc})") from None


def _merged(
    repo: Repo, config: Config, target: Target, message: str, api: GitHubAPI | None
) -> landmerge.Merge:
    """How the target lands: locally (``landmerge.plan``), or its pull request merged on
    GitHub (then ``previous`` is unknown, "")."""
    base, branch, pull = target.base, target.branch, target.pull
    if api is None or pull is None:
        return landmerge.plan(repo.git, f"refs/heads/{base}", f"refs/heads/{branch}", message)
    commit = branch_tip(repo, branch) or ""
    done = landpull.merge(repo, config, api, pull, branch, message)
    return landmerge.Merge(done.how, "", commit, done.sha, done.conflicts)


def _one(
    repo: Repo,
    config: Config,
    layout: Layout,
    target: Target,
    by: Asker,
    api: GitHubAPI | None,
) -> dict[str, Any]:
    record, base, branch, pull = target
    ticket = record.ticket
    message = f"Land {branch} into {base}\n\ncairn fleet land {ticket} (asked by {by}).\n"
    merge = _merged(repo, config, target, message, api)
    answer: dict[str, Any] = {
        "ticket": ticket,
        "base": base,
        "branch": branch,
        "commit": merge.commit,
        "previous": merge.previous,
        "how": merge.how,
    }
    if pull is not None:
        answer["previous"] = None
        answer["pull"] = pull.get("number")
    if merge.how == "conflict":
        onto = base if pull is None else landpull.remote_base(config, base)
        done = fixround.ask(
            layout,
            record,
            [finding(ticket, branch, onto, merge.conflicts)],
            by,
            WHY,
            base=base,
            base_commit=merge.previous or None,
            commit=merge.commit,
            conflicts=merge.conflicts,
        )
        wish(layout, ticket, by)
        return {**answer, "landed": False, "conflicts": merge.conflicts, "round": done.round}
    try:
        if pull is None:
            landmerge.advance(repo, f"refs/heads/{base}", merge, f"cairn: land {ticket}")
    except GitError as exc:
        raise BadInput(
            f"{base} could not be moved to land {ticket} ({exc}); land it again"
        ) from exc
    run_id = layout.latest_run(ticket)
    if run_id is not None:
        runstate.record(
            runstate.RunRef(layout, ticket, run_id),
            "landed",
            by=by,
            base=base,
            branch=branch,
            commit=merge.commit,
            previous=merge.previous or None,
            merge=merge.new,
            how=merge.how,
            pull=answer.get("pull"),
        )
    durable.remove(wish_path(layout, ticket))
    return {**answer, "landed": True, "merge": merge.new}


def finding(ticket: str, branch: str, base: str, conflicts: list[str]) -> fixround.Finding:
    files = ", ".join(conflicts)
    return fixround.Finding(
        id=FINDING,
        title=f"rebase {branch} onto {base} and resolve the conflicts",
        details=(
            f"{branch} no longer merges cleanly into {base}, which moved on: conflicts in "
            f"{files}. Bring the branch up to date: rebase it onto {base} (or merge {base} into "
            "it), resolve each conflict keeping the intent of both sides, run the tests, and "
            f"commit; ticket {ticket} then lands by itself."
        ),
    )


# --- wishes: a land waiting for its fix round --------------------------------------------------


def wish_path(layout: Layout, ticket: str) -> Path:
    directory = layout.fleet_dir / WISHES
    durable.check_state_dir(directory, "fleet landing directory")
    return directory / f"{ticket}.json"


def wish(layout: Layout, ticket: str, by: Asker) -> None:
    path = wish_path(layout, ticket)
    durable.ensure_dir(path.parent)
    at = clock.now().isoformat()
    durable.atomic_write(path, json.dumps({"ticket": ticket, "by": by, "at": at}) + "\n")


def wished(layout: Layout, ticket: str) -> Asker | None:
    """Who asked for ``ticket``'s land that waits for its fix round; None when none waits."""
    path = wish_path(layout, ticket)
    try:
        data = durable.read_state_file(path, "fleet land wish", READ_LIMIT)
        raw: Any = json.loads(data) if data is not None else None
    except (OSError, ValueError):
        return "fleet"
    if not isinstance(raw, dict):
        return None
    by = raw.get("by")
    return next((s for s in ASKERS if s == by), "fleet")


def after_fix_round(
    repo: Repo, config: Config, layout: Layout, record: FleetTicket
) -> dict[str, Any] | None:
    """Land ``record``'s ticket, which just ended, when a land waits for its fix round and it
    ended ``completed``: what was done (None when nothing waits). BadInput when it cannot land
    now (the wish stays for a person's land)."""
    if record.state != "completed" or wished(layout, record.ticket) is None:
        return None
    (done,) = land(repo, config, layout, [record.ticket], "fleet")
    return done


def status(repo: Repo, config: Config, layout: Layout, ticket: str) -> dict[str, Any]:
    """Whether ``ticket`` can land now, and why not (``GET /api/v1/tickets/{id}/land``, the
    page's *Land* button); ``Refused`` 404 for an unknown ticket. On the github tracker only
    the local checks (GitHub is asked when it lands), and ``landed`` is about the local base."""
    base = base_of(repo, config)
    try:
        _checked(repo, layout, ticket)
        if config.fleet.tracker != "github":
            _check_base(repo, base)
        reason = None
    except Refused as exc:
        if exc.status == 404:
            raise
        reason = str(exc)
    record = fleetstate.read(layout, ticket)
    assert record is not None
    branch = record.branch or f"cairn/{ticket}"
    tips = [branch_tip(repo, name) for name in (branch, base)]
    landed = None not in tips and landmerge.ancestor(repo.git, str(tips[0]), str(tips[1]))
    return {
        "ticket": ticket,
        "base": base,
        "branch": branch,
        "landable": reason is None,
        "reason": reason,
        "landed": landed,
        "waiting": wish_path(layout, ticket).exists(),
    }
