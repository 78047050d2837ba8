"""``cairn mcp``: the progress commands as MCP tools, served on stdio (official ``mcp`` SDK).

An agent whose client speaks MCP reports progress through tools instead of shelling out to
``cairn task done 3 …``. Every tool calls the same functions as the CLI: the run is found as
``cairn task`` finds it (``CAIRN_RUN_DIR`` in the server's environment, else the ``ticket``
argument's live run, else the branch's), in the workspace the server was started in.

A cairn error becomes an error result (``isError``) carrying its one-line message; the server keeps
serving. Each tool answers with one short line of text and, where a result has a shape, structured
content that its advertised output schema describes.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, ParamSpec, TypeVar

import msgspec
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import CallToolResult, TextContent
from pydantic import Field, ValidationError

from cairn import __version__
from cairn.errors import BadInput, explain
from cairn.integrations.mcp_schema import (
    Files,
    FindingAdded,
    Item,
    Notes,
    Progress,
    Reported,
    RunTicket,
    TaskNumber,
    as_arguments,
    output_schema,
    problem,
    strict,
)
from cairn.state.catchup import CatchupReport
from cairn.state.runstate import RunRef
from cairn.summary import Summary
from cairn.terms import ENV_RUN_DIR, FindingResolution, SetAside, Verdict
from cairn.wip.models import SaveResult

P = ParamSpec("P")
R = TypeVar("R")

INSTRUCTIONS = (
    "cairn records this coding run so that an interruption loses nothing. Call task_start "
    "before you work on a plan task and task_done when it is finished (with the files you "
    "changed); report review findings with finding_update and checks with gate_result. "
    "progress and catchup say where the run stands; wip_save snapshots uncommitted work."
)


class _Server(MCPServer):
    """MCPServer whose argument errors are one line naming the argument, like every other
    cairn error."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if not isinstance(cause, ValidationError) or isinstance(exc, UnexpectedToolError):
                raise
            declared = list(self._tool_manager._tools[name].fn_metadata.arg_model.model_fields)
            problems = "; ".join(problem(error, declared) for error in cause.errors())
            raise ToolError(f"Error executing tool {name}: {problems}") from cause

    def make_strict(self) -> None:
        """Every tool's arguments: no unknown key, no loose type (``true`` is not task 1)."""
        for tool in self._tool_manager.list_tools():
            model = strict(tool.fn_metadata.arg_model)
            tool.fn_metadata.arg_model = model  # type: ignore[assignment]
            tool.parameters = model.model_json_schema(by_alias=True)
            output = getattr(tool.fn, OUTPUT, None)
            if output is not None:
                tool.fn_metadata.output_schema = output_schema(output)


OUTPUT = "cairn_output"  # the attribute of a tool's function naming its result's record


def _tool(output: type[msgspec.Struct]) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """A tool whose structured result is an ``output`` record (its output schema), and whose
    cairn errors become a tool error with their one-line message, naming the tool's arguments
    where the CLI's message names a flag; never a crash."""

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        declared = list(inspect.signature(fn).parameters)

        @functools.wraps(fn)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return fn(*args, **kwargs)
            except ToolError:
                raise
            except Exception as exc:
                message = explain(exc, debug_hint="logs the traceback")[1]
                raise ToolError(as_arguments(message, declared)) from None

        setattr(wrapper, OUTPUT, output)
        return wrapper

    return decorate


def _reply(text: str, data: msgspec.Struct) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=msgspec.to_builtins(data),
    )


def _reported(ref: RunRef, after: Summary, what: str) -> CallToolResult:
    from cairn.summary.render import status_line

    path = ref.summary_path()
    data = Reported(
        ticket=ref.ticket,
        run=ref.run_id,
        summary_path=str(path) if path else None,
        status=status_line(after),
        resolved=after.resolved(),
        total=after.total(),
    )
    return _reply(f"{what} · {data.status}", data)


def _items(loaded: Summary) -> tuple[list[Item], list[Item]]:
    """Tasks (or findings) resolved, and those still to do."""
    entries: list[tuple[Item, bool]] = [
        (Item(id=str(t.number), title=t.title, status=t.status), t.resolved) for t in loaded.tasks
    ] + [(Item(id=f.id, title=f.title, status=f.status), f.resolved) for f in loaded.findings]
    return [i for i, ok in entries if ok], [i for i, ok in entries if not ok]


def build(workspace: Path | str = ".", environ: Mapping[str, str] | None = None) -> MCPServer:
    """The server with cairn's tools; ``environ`` (default ``os.environ``) holds CAIRN_RUN_DIR."""
    workspace = Path(workspace)
    env: Mapping[str, str] = os.environ if environ is None else environ
    server = _Server(
        "cairn",
        title="cairn",
        instructions=INSTRUCTIONS,
        version=__version__,
        log_level="WARNING",
    )

    def locate(ticket: str | None) -> RunRef:
        from cairn.run.progress import locate

        return locate(workspace, ticket, env)

    def run_of(ticket: str | None) -> tuple[str | None, str | None]:
        """Ticket and run id as given, else CAIRN_RUN_DIR's; (None, None) means the branch's."""
        if ticket is not None or not env.get(ENV_RUN_DIR):
            return ticket, None
        from cairn.state.layout import Layout

        _, found, run_id = Layout.from_run_dir(Path(env[ENV_RUN_DIR]))
        return found, run_id

    @server.tool()
    @_tool(Reported)
    def task_start(task: TaskNumber, ticket: RunTicket = None) -> CallToolResult:
        """Mark a plan task in progress; call it before working on the task."""
        from cairn.run import progress

        ref = locate(ticket)
        n = task
        return _reported(ref, progress.task_start(ref, n), f"task {n} in progress")

    @server.tool()
    @_tool(Reported)
    def task_done(
        task: TaskNumber,
        files: Files = None,
        outcome: Annotated[str | None, Field(description="What now works.")] = None,
        notes: Notes = None,
        ticket: RunTicket = None,
    ) -> CallToolResult:
        """Mark a plan task completed, with the files it changed and its outcome."""
        from cairn.run import progress

        ref = locate(ticket)
        n = task
        paths = [part.strip() for value in files or [] for part in value.split(",") if part.strip()]
        after = progress.task_done(ref, n, files=paths, outcome=outcome, notes=notes)
        return _reported(ref, after, f"task {n} completed")

    @server.tool()
    @_tool(Reported)
    def task_set_aside(
        task: TaskNumber,
        status: Annotated[SetAside, Field(description="The new status.")],
        notes: Annotated[str, Field(description="Why it is skipped, or what is left.")],
        ticket: RunTicket = None,
    ) -> CallToolResult:
        """Mark a plan task skipped or deferred; notes say why (cairn task skip|defer)."""
        from cairn.run import progress

        ref = locate(ticket)
        n = task
        after = progress.task_set_aside(ref, n, status, notes)
        return _reported(ref, after, f"task {n} {status}")

    @server.tool()
    @_tool(Reported)
    def finding_update(
        finding: Annotated[str, Field(description="Finding id from the review, e.g. F1.")],
        status: Annotated[FindingResolution, Field(description="How it was addressed.")],
        action: Annotated[str | None, Field(description="What was done.")] = None,
        ticket: RunTicket = None,
    ) -> CallToolResult:
        """Record how a review finding was addressed (cairn finding ID --status …)."""
        from cairn.run import progress

        ref = locate(ticket)
        after = progress.finding(ref, finding, status, action)
        return _reported(ref, after, f"{finding} {status}")

    @server.tool()
    @_tool(FindingAdded)
    def finding_add(
        finding: Annotated[str, Field(description="New finding id, e.g. F1 or W2.")],
        title: Annotated[str, Field(description="One line: what is wrong.")],
        location: Annotated[str | None, Field(description="path:line")] = None,
        details: Annotated[str | None, Field(description="What is wrong, in more words.")] = None,
        ticket: RunTicket = None,
    ) -> CallToolResult:
        """(Reviewers) add a finding to the run's current review (cairn finding add)."""
        from cairn.run import progress

        ref = locate(ticket)
        after = progress.add_finding(ref, finding, title, location, details)
        data = FindingAdded(
            ticket=ref.ticket,
            run=ref.run_id,
            finding=finding,
            round=after.round,
            findings=len(after.findings),
        )
        return _reply(f"{finding} recorded in round {after.round}", data)

    @server.tool()
    @_tool(Reported)
    def gate_result(
        name: Annotated[str, Field(description="Gate name, e.g. Tests or Lint.")],
        result: Annotated[Verdict, Field(description="pass or fail.")],
        command: Annotated[str | None, Field(description="The command run.")] = None,
        ticket: RunTicket = None,
    ) -> CallToolResult:
        """Record a quality gate's result (cairn gate NAME --result …)."""
        from cairn.run import progress

        ref = locate(ticket)
        after = progress.gate(ref, name, result, command)
        return _reported(ref, after, f"gate {name}: {result}")

    @server.tool()
    @_tool(Progress)
    def progress(ticket: RunTicket = None) -> CallToolResult:
        """Where the run stands: the summary's status line, tasks done and remaining, and the
        marker's phase, round and task."""
        from cairn.state import marker
        from cairn.summary.render import status_line

        ref = locate(ticket)
        path, loaded = ref.load_summary()
        current = marker.read(ref.marker_path)
        if current is not None and current.run != ref.run_id:
            current = None
        done, remaining = _items(loaded)
        data = Progress(
            ticket=ref.ticket,
            run=ref.run_id,
            summary_path=str(path),
            mode=loaded.mode,
            status=status_line(loaded),
            resolved=loaded.resolved(),
            total=loaded.total(),
            done=done,
            remaining=remaining,
            phase=current.phase if current else None,
            round=current.round if current else loaded.round,
            task=current.task if current else None,
        )
        where = [f"phase {data.phase}"] if data.phase else []
        if data.round is not None:
            where.append(f"round {data.round}")
        if data.task is not None:
            where.append(f"task {data.task}")
        text = f"{ref.ticket} {ref.run_id}: {data.status}"
        if where:
            text += f" ({', '.join(where)})"
        ids = [", ".join(i.id for i in part) or "none" for part in (done, remaining)]
        return _reply(f"{text}; done: {ids[0]}; remaining: {ids[1]}", data)

    @server.tool()
    @_tool(CatchupReport)
    def catchup(
        ticket: Annotated[
            str | None,
            Field(description="Ticket id (default: CAIRN_RUN_DIR's ticket, else the branch's)."),
        ] = None,
        format: Annotated[
            Literal["json", "context"],
            Field(description="context: a paragraph for your context; json: the full report."),
        ] = "context",
    ) -> CallToolResult:
        """Where the last run of a ticket got to, and what to do next (cairn catchup)."""
        from cairn.state.catchup import catchup as build_report
        from cairn.state.catchup_text import context_paragraph

        report = build_report(workspace, run_of(ticket)[0])
        if format == "json":
            text = msgspec.json.format(msgspec.json.encode(report), indent=2).decode()
            return _reply(text, report)
        return _reply(context_paragraph(report), report)

    @server.tool()
    @_tool(SaveResult)
    def wip_save(
        reason: Annotated[str, Field(description="Why the snapshot is taken.")] = "mcp",
        ticket: Annotated[
            str | None,
            Field(description="Ticket id (default: CAIRN_RUN_DIR's ticket, else the branch's)."),
        ] = None,
    ) -> CallToolResult:
        """Snapshot uncommitted work to refs/cairn/wip/<ticket>; touches nothing else."""
        from cairn import wip

        found, run_id = run_of(ticket)
        result = wip.save(workspace, ticket=found, reason=reason, run_id=run_id)
        return _reply(result.summary, result)

    server.make_strict()
    return server


def serve(workspace: Path | str = ".") -> None:
    """Serve the tools on stdin/stdout until the client closes the connection."""
    workspace = Path(workspace)
    if not workspace.is_dir():
        raise BadInput(f"workspace {workspace} is not a directory")
    import anyio

    from cairn.integrations.mcp_frames import serve_stdio

    anyio.run(serve_stdio, build(workspace))
