"""``cairn fleet retry TICKET…`` on the temporal engine, for the command line and the dashboard
alike: every ticket checked first (a running, completed or unknown one changes nothing), then,
with ``fresh_config``, the base branch's ``cairn.toml`` committed onto each ticket branch, then a
new run of each ticket's workflow, resuming from what the shared remote holds."""

from __future__ import annotations

from typing import NamedTuple

from temporalio.client import Client

from cairn.config.records import Config
from cairn.errors import BadInput
from cairn.git import Repo
from cairn.remote.refs import TicketRefs
from cairn.scale import control, freshconfig
from cairn.scale.messages import workflow_id
from cairn.scale.remote import base_of, fleet_key, url_of
from cairn.scale.workflow import TicketWorkflow


class Retried(NamedTuple):
    key: str  # the fleet key the workflow ids start with
    was: dict[str, str]  # ticket → the final state it was retried from
    said: dict[str, str]  # ticket → the config its run uses
    runs: dict[str, str]  # ticket → the new run's id


async def retry(
    client: Client, repo: Repo, config: Config, asked: list[str], fresh_config: bool, by: str
) -> Retried:
    """Retry each ticket of ``asked`` (valid ids, no repeats), as ``by`` asked."""
    from cairn.fleet.trackers import open_tracker
    from cairn.scale.starter import ticket_input
    from cairn.state.layout import Layout

    remote = url_of(repo, config.fleet.remote)
    key = fleet_key(repo, config.fleet.id, config.fleet.remote, config.fleet.base)
    tracker = open_tracker(repo, config, Layout.for_repo(repo, config))
    plans = {c.ticket: c for c in tracker.candidates()}
    missing = [t for t in asked if t not in plans]
    if missing:
        raise BadInput(
            f"no plan for {', '.join(missing)} in the queue ({config.fleet.queue}); put the "
            "ticket's plan back there to retry it"
        )
    base = base_of(repo, remote, config.fleet.base)
    refs = {t: TicketRefs.of(t, config.snapshot.ref_prefix) for t in asked}
    was = await control.retryable(client, key, asked)
    said: dict[str, str] = {}
    if fresh_config:
        for t in asked:
            freshconfig.check(repo, remote, base, refs[t], t)
        for t in asked:
            said[t] = freshconfig.take(repo, remote, base, refs[t], t)
    else:
        said = {t: freshconfig.used(repo, remote, base, refs[t], t) for t in asked}
    inputs = [ticket_input(config, plans[t], remote, base) for t in asked]
    runs = await control.retry(client, config.temporal, key, inputs)
    for ticket in asked:
        handle = client.get_workflow_handle(workflow_id(key, ticket))
        await handle.signal(TicketWorkflow.asked, args=["retry", by])
    return Retried(key, was, said, runs)
