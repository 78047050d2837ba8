"""YAML and JSON plans: ``{ticket?, title?, tasks: [...]}`` or a bare list of tasks.

A task is a title, or a mapping with ``title`` and optional ``number``, ``details``,
``acceptance`` and ``done``. Errors name the line of the offending value.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import yaml

from cairn.run.plan.checks import check_numbers, fail, kind_of, ticket_and_title
from cairn.run.plan.model import ACCEPTED_FORMS, Plan, PlanFormat, PlanTask
from cairn.util.yaml_io import YAMLError, safe_load

_COMPOSE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Locator:
    """Line numbers of values in a YAML/JSON document, composed only when an error needs one."""

    def __init__(self, text: str, fmt: str) -> None:
        # JSON allows tabs between tokens where YAML does not; they are never inside strings.
        self._text = text.replace("\t", " ") if fmt == "json" else text
        self._root: yaml.Node | None = None
        self._composed = False

    def line(self, *path: str | int) -> int:
        if not self._composed:
            self._composed = True
            try:
                self._root = yaml.compose(self._text, Loader=_COMPOSE_LOADER)
            except (YAMLError, RecursionError):
                self._root = None
        node, line = self._root, 1
        for key in path:
            if node is None:
                break
            line = node.start_mark.line + 1
            node = _child(node, key)
        if node is not None:
            line = node.start_mark.line + 1
        return line


def _child(node: yaml.Node, key: str | int) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.value == key:
                return value_node  # type: ignore[no-any-return]
    elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
        return node.value[key]  # type: ignore[no-any-return]
    return None


def _load_structured(text: str, source: str, fmt: PlanFormat) -> Any:
    try:
        if fmt == "json":
            return json.loads(text)
        return safe_load(text)
    except json.JSONDecodeError as exc:
        fail(source, exc.lineno, f"invalid JSON: {exc.msg} (column {exc.colno})", "fix the syntax")
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 1
        problem = getattr(exc, "problem", None) or str(exc)
        fail(
            source,
            line,
            f"invalid YAML: {problem}",
            "fix the syntax (quote titles that contain ': ' or start with a special character)",
        )
    except RecursionError:
        fail(source, 1, f"the {fmt.upper()} plan is nested too deeply", "flatten it")


def parse_structured(text: str, source: str, fmt: PlanFormat) -> Plan:
    data = _load_structured(text, source, fmt)
    where = _Locator(text, fmt)
    items: Any
    prefix: tuple[str, ...]
    if isinstance(data, list):
        items, prefix, ticket, title = data, (), None, None
    elif isinstance(data, dict):
        if "tasks" not in data:
            fail(source, 1, "the plan has no 'tasks' key", ACCEPTED_FORMS)
        items, prefix = data["tasks"], ("tasks",)
        if items is not None and not isinstance(items, list):
            fail(
                source,
                where.line("tasks"),
                f"'tasks' must be a list, not {kind_of(items)}",
                "give one list item per task, each a title or a mapping with 'title'",
            )
        ticket, title = ticket_and_title(data, source, where.line)
    elif data is None:
        fail(source, 1, "no tasks found", ACCEPTED_FORMS)
    else:
        fail(
            source,
            1,
            f"the plan must be a mapping with 'tasks' or a list of tasks, not {kind_of(data)}",
            ACCEPTED_FORMS,
        )
    if not items:
        fail(source, where.line(*prefix), "no tasks found", ACCEPTED_FORMS)
    tasks = [
        _structured_task(item, pos, source, lambda *key, pos=pos: where.line(*prefix, pos, *key))
        for pos, item in enumerate(items)
    ]
    check_numbers([t.number for t in tasks], lambda pos: where.line(*prefix, pos), source)
    return Plan(ticket=ticket, title=title, tasks=tasks, source=source, format=fmt)


def _structured_task(item: Any, pos: int, source: str, line_of: Callable[..., int]) -> PlanTask:
    if isinstance(item, str):
        item = {"title": item}
    elif not isinstance(item, dict):
        fail(
            source,
            line_of(),
            f"task {pos} must be a title or a mapping with 'title', not {kind_of(item)}",
            "write '- Add the parser' or '- title: Add the parser'",
        )
    return PlanTask(
        number=_task_number(item, pos, source, line_of),
        title=_task_title(item, pos, source, line_of),
        details=_task_details(item, pos, source, line_of),
        acceptance=_task_acceptance(item, pos, source, line_of),
        done=_task_done(item, pos, source, line_of),
    )


def _task_title(item: dict[Any, Any], pos: int, source: str, line_of: Callable[..., int]) -> str:
    if item.get("title") is None:
        fail(source, line_of(), f"task {pos} has no 'title'", "give every task a 'title'")
    title = item["title"]
    if not isinstance(title, str):
        fail(
            source,
            line_of("title"),
            f"task {pos} 'title' must be a string, not {kind_of(title)}",
            "quote the title",
        )
    title = title.strip()
    if not title:
        fail(source, line_of("title"), f"task {pos} has an empty title", "write a title")
    if "\n" in title or "\r" in title:
        fail(
            source,
            line_of("title"),
            f"task {pos} 'title' must be one line",
            "move the rest into 'details'",
        )
    return title


def _task_number(item: dict[Any, Any], pos: int, source: str, line_of: Callable[..., int]) -> int:
    number = item.get("number")
    if number is None:
        return pos
    if isinstance(number, bool) or not isinstance(number, int) or number < 0:
        fail(
            source,
            line_of("number"),
            f"task {pos} 'number' must be a whole number 0 or more, not {number!r}",
            "fix the number or leave it out to use the task's position",
        )
    return number


def _task_details(item: dict[Any, Any], pos: int, source: str, line_of: Callable[..., int]) -> str:
    details = item.get("details")
    if details is None:
        return ""
    if not isinstance(details, str):
        fail(
            source,
            line_of("details"),
            f"task {pos} 'details' must be a string, not {kind_of(details)}",
            "write the details as one (block) string",
        )
    return details.strip()


def _task_acceptance(
    item: dict[Any, Any], pos: int, source: str, line_of: Callable[..., int]
) -> list[str]:
    criteria = item.get("acceptance")
    if criteria is None:
        return []
    fix = "write one criterion string per list item"
    if not isinstance(criteria, list):
        fail(
            source,
            line_of("acceptance"),
            f"task {pos} 'acceptance' must be a list of strings, not {kind_of(criteria)}",
            fix,
        )
    for index, criterion in enumerate(criteria):
        if not isinstance(criterion, str):
            fail(
                source,
                line_of("acceptance", index),
                f"task {pos} 'acceptance' item {index} must be a string, not {kind_of(criterion)}",
                fix,
            )
    return [c.strip() for c in criteria if c.strip()]


def _task_done(item: dict[Any, Any], pos: int, source: str, line_of: Callable[..., int]) -> bool:
    done = item.get("done", False)
    if not isinstance(done, bool):
        fail(
            source,
            line_of("done"),
            f"task {pos} 'done' must be true or false, not {kind_of(done)}",
            "write 'done: true' or leave it out",
        )
    return done
