"""Landing on the ``github`` tracker (``cairn.fleet.land``): the ticket's pull request is merged
on GitHub (``PUT /repos/{owner}/{repo}/pulls/{number}/merge``, a merge commit, only while its
head is the branch's local tip), after the branch is pushed to ``fleet.remote`` (a fix round's
commits are pushed before the tracker hears the ticket ended). GitHub's 405 (not mergeable) or
409 (its head moved) is a conflict: the files are named from a local ``git merge-tree`` of the
branch and the remote's base, fetched into ``refs/remotes/<remote>/<base>`` (which the fix
round's agent is asked to merge); when that merges cleanly the refusal is GitHub's own
(branch protection, merge commits not allowed) and is said as it is.
"""

from __future__ import annotations

import os
from typing import Any, NamedTuple

from cairn.config.records import Config
from cairn.errors import BadInput, CairnError
from cairn.fleet import landmerge
from cairn.fleet.facts import push_branch
from cairn.fleet.github_api import GitHubAPI, GitHubError
from cairn.fleet.gitworktree import branch_tip
from cairn.fleet.landmerge import How
from cairn.git import Repo
from cairn.remote.refs import PushFailed

REFUSED = (405, 409)  # GitHub's answers to a merge it will not make


class Merged(NamedTuple):
    how: How  # "already", "pull_request" or "conflict"
    sha: str | None  # the merge commit on GitHub
    conflicts: list[str]


def open_api(config: Config) -> GitHubAPI:
    settings = config.fleet.github
    token = os.environ.get("GITHUB_TOKEN") or os.environ.get("GH_TOKEN")
    if not token or settings.repo is None:
        raise BadInput(
            f"landing merges {settings.repo}'s pull requests and needs a token; set "
            "GITHUB_TOKEN or GH_TOKEN"
        )
    return GitHubAPI(settings.api_url, settings.repo, token)


def find(api: GitHubAPI, ticket: str, branch: str) -> dict[str, Any]:
    """The ticket's pull request; BadInput when there is none to merge (nothing changed)."""
    try:
        pull = api.find_pull(branch)
    except GitHubError as exc:
        raise BadInput(
            f"ticket {ticket}'s pull request cannot be read ({exc}); land again"
        ) from None
    if pull is None:
        raise BadInput(
            f"ticket {ticket} has no pull request from {branch} yet; the github tracker opens "
            "it when its run ends (cairn fleet start), then land it"
        )
    if pull.get("state") == "closed" and not pull.get("merged_at"):
        raise BadInput(
            f"ticket {ticket}'s pull request #{pull.get('number')} is closed; reopen it on "
            "GitHub, then land it"
        )
    if pull.get("draft") and pull.get("state") == "open":
        raise BadInput(
            f"ticket {ticket}'s pull request #{pull.get('number')} is a draft; mark it ready "
            "for review on GitHub, then land it"
        )
    return pull


def merge(
    repo: Repo, config: Config, api: GitHubAPI, pull: dict[str, Any], branch: str, message: str
) -> Merged:
    """Push ``branch`` and merge ``pull`` on GitHub; a conflict names the files."""
    if pull.get("merged_at"):
        return Merged("already", None, [])
    ticket = branch.removeprefix("cairn/")
    try:
        push_branch(repo, config, ticket)
    except PushFailed as exc:
        raise BadInput(f"{exc}; fix the remote, then land {ticket} again") from None
    sha = branch_tip(repo, branch)
    assert sha is not None  # checked by the caller
    title, _, body = message.partition("\n\n")
    try:
        answer = api.merge_pull(int(pull["number"]), sha=sha, title=title, message=body)
    except GitHubError as exc:
        if exc.status not in REFUSED:
            raise BadInput(f"the merge of ticket {ticket}'s pull request failed: {exc}") from None
        conflicts = _conflicts(repo, config, api, branch)
        if not conflicts:
            raise BadInput(
                f"GitHub refused to merge ticket {ticket}'s pull request: {exc}"
            ) from None
        return Merged("conflict", None, conflicts)
    return Merged("pull_request", str(answer.get("sha") or "") or None, [])


def remote_base(config: Config, base: str) -> str:
    """The remote-tracking name of GitHub's base branch: what a fix round merges."""
    return f"{config.fleet.remote}/{base}"


def _conflicts(repo: Repo, config: Config, api: GitHubAPI, branch: str) -> list[str]:
    """The files ``branch`` conflicts in with the remote's base (fetched now); [] when it
    merges cleanly or cannot be told."""
    try:
        tracking = remote_base(config, api.default_branch())
        refspec = f"+refs/heads/{tracking.partition('/')[2]}:refs/remotes/{tracking}"
        repo.git.run(["fetch", "--quiet", config.fleet.remote, refspec])
        planned = landmerge.plan(repo.git, f"refs/remotes/{tracking}", f"refs/heads/{branch}", "-")
    except (CairnError, GitHubError):
        return []
    return planned.conflicts
