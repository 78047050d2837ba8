"""The fake Linear server's resolvers (tests/fleet/fake_linear.py): each root field of
linear_schema.graphql a method, each object a dict whose fields with arguments are callables
(graphql-core's default resolver calls them with the arguments), and Linear's filters
(comparators, ``and``/``or``, ``some``/``every`` of a label collection) and pages (``first``,
``after``) over the fake's in-memory data."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from graphql import GraphQLError

if TYPE_CHECKING:
    from fleet.fake_linear import FakeLinear


class Root:
    """The resolvers: each root field a method, each object a dict whose fields with arguments
    are callables (graphql-core's default resolver calls them with the arguments)."""

    def __init__(self, fake: FakeLinear) -> None:
        self.fake = fake

    # --- views ---

    def team(self, key: str) -> dict[str, Any]:
        found = next(t for t in self.fake.teams if t["key"] == key)
        states = [self.state(s) for s in self.fake.states if s["team"] == key]
        labels = [self.label(lab) for lab in self.fake.labels if lab["team"] == key]
        return {
            **found,
            "states": lambda _info, **args: _connection(_filtered(states, args), args),
            "labels": lambda _info, **args: _connection(_filtered(labels, args), args),
        }

    def state(self, state: dict[str, Any]) -> dict[str, Any]:
        return {**state, "team": lambda _info: self.team(state["team"])}

    def label(self, label: dict[str, Any]) -> dict[str, Any]:
        team = label["team"]
        return {**label, "team": (lambda _info: self.team(team)) if team else None}

    def issue_view(self, issue: dict[str, Any]) -> dict[str, Any]:
        state = next(s for s in self.fake.states if s["id"] == issue["state"])
        labels = [lab for lab in self.fake.labels if lab["name"] in issue["labels"]]
        comments = [
            {
                **c,
                "url": f"{issue['url']}#comment-{c['id']}",
                "createdAt": c.get("createdAt") or issue["createdAt"],
                "user": c.get("user"),  # a person's; cairn's own (the API key's) say none here
            }
            for c in self.fake.comments
            if c["issue"] == issue["id"]
        ]
        attachments = [a for a in self.fake.attachments if a["issue"] == issue["id"]]
        return {
            **issue,
            "state": self.state(state),
            "team": lambda _info: self.team(issue["team"]),
            "labels": lambda _info, **args: _connection([self.label(x) for x in labels], args),
            "comments": lambda _info, **args: _connection(comments, args),
            "attachments": lambda _info, **args: _connection(attachments, args),
        }

    def find(self, id_or_identifier: str, uuid_only: bool = False) -> dict[str, Any]:
        """The issue of an id, or of an identifier (``IDE-1``) where Linear takes one; a
        comment's ``issueId`` is held to the id: Linear documents no identifier there."""
        for issue in self.fake.issues.values():
            if id_or_identifier == issue["id"] or (
                not uuid_only and id_or_identifier == issue["identifier"]
            ):
                return issue
        raise GraphQLError(
            "Entity not found: Issue",
            extensions={
                "type": "invalid input",
                "code": "INPUT_ERROR",
                "userPresentableMessage": "Could not find referenced Issue.",
            },
        )

    # --- queries ---

    def issues(self, _info: Any, **args: Any) -> dict[str, Any]:
        views = [self.issue_view(i) for i in self.fake.issues.values()]
        return _connection(_filtered(views, args), args)

    def issue(self, _info: Any, id: str) -> dict[str, Any]:
        return self.issue_view(self.find(id))

    def teams(self, _info: Any, **args: Any) -> dict[str, Any]:
        views = [self.team(t["key"]) for t in self.fake.teams]
        return _connection(_filtered(views, args), args)

    def workflowStates(self, _info: Any, **args: Any) -> dict[str, Any]:
        views = [self.state(s) for s in self.fake.states]
        return _connection(_filtered(views, args), args)

    def issueLabels(self, _info: Any, **args: Any) -> dict[str, Any]:
        views = [self.label(lab) for lab in self.fake.labels]
        return _connection(_filtered(views, args), args)

    # --- mutations ---

    def issueUpdate(self, _info: Any, id: str, input: dict[str, Any]) -> dict[str, Any]:
        issue = self.find(id)
        state = input.get("stateId")
        if state is not None:
            if not any(s["id"] == state and s["team"] == issue["team"] for s in self.fake.states):
                raise GraphQLError(
                    "stateId: not a state of the issue's team",
                    extensions={"type": "invalid input", "code": "INPUT_ERROR"},
                )
            issue["state"] = state
        return {"success": True, "lastSyncId": 1.0, "issue": self.issue_view(issue)}

    def commentCreate(self, _info: Any, input: dict[str, Any]) -> dict[str, Any]:
        issue = self.find(str(input.get("issueId")), uuid_only=True)
        if any(c["id"] == input.get("id") for c in self.fake.comments):  # Linear's ids are unique
            raise GraphQLError(
                "Comment with this id already exists",
                extensions={"type": "invalid input", "code": "INPUT_ERROR"},
            )
        comment = {
            "id": input.get("id") or f"comment-{len(self.fake.comments) + 1}",
            "issue": issue["id"],
            "body": input.get("body") or "",
        }
        self.fake.comments.append(comment)
        view = {
            **comment,
            "url": issue["url"],
            "createdAt": issue["createdAt"],
            "issue": lambda _info: self.issue_view(issue),
        }
        return {"success": True, "lastSyncId": 1.0, "comment": view}

    def attachmentCreate(self, _info: Any, input: dict[str, Any]) -> dict[str, Any]:
        issue = self.find(input["issueId"])
        return self._attach(issue, input["url"], input["title"], input.get("subtitle"))

    def attachmentLinkURL(
        self,
        _info: Any,
        issueId: str,
        url: str,
        title: str | None = None,
        **_: Any,
    ) -> dict[str, Any]:
        return self._attach(self.find(issueId), url, title or url, None)

    def _attach(
        self, issue: dict[str, Any], url: str, title: str, subtitle: str | None
    ) -> dict[str, Any]:
        """Linear's rule: the same url on the same issue updates the attachment."""
        found = next(
            (a for a in self.fake.attachments if a["issue"] == issue["id"] and a["url"] == url),
            None,
        )
        if found is None:
            found = {
                "id": f"attachment-{len(self.fake.attachments) + 1}",
                "issue": issue["id"],
                "url": url,
                "createdAt": issue["createdAt"],
            }
            self.fake.attachments.append(found)
        found.update(title=title, subtitle=subtitle)
        view = {**found, "issue": lambda _info: self.issue_view(issue)}
        return {"success": True, "lastSyncId": 1.0, "attachment": view}


# --- filters and pages ----------------------------------------------------------------------------


def _value(view: Any, name: str, info: Any = None) -> Any:
    value = view.get(name) if isinstance(view, dict) else None
    return value(info) if callable(value) else value


def _compare(value: Any, comparator: dict[str, Any]) -> bool:
    tests: dict[str, Callable[[Any, Any], bool]] = {
        "eq": lambda v, x: v == x,
        "neq": lambda v, x: v != x,
        "in": lambda v, x: v in x,
        "nin": lambda v, x: v not in x,
        "eqIgnoreCase": lambda v, x: str(v).lower() == str(x).lower(),
        "neqIgnoreCase": lambda v, x: str(v).lower() != str(x).lower(),
        "contains": lambda v, x: x in str(v),
        "containsIgnoreCase": lambda v, x: str(x).lower() in str(v).lower(),
        "notContains": lambda v, x: x not in str(v),
        "startsWith": lambda v, x: str(v).startswith(x),
        "endsWith": lambda v, x: str(v).endswith(x),
        "lt": lambda v, x: v < x,
        "lte": lambda v, x: v <= x,
        "gt": lambda v, x: v > x,
        "gte": lambda v, x: v >= x,
    }
    return all(tests[op](value, wanted) for op, wanted in comparator.items() if wanted is not None)


def _matches(view: dict[str, Any], filter_: dict[str, Any] | None) -> bool:
    for name, wanted in (filter_ or {}).items():
        if wanted is None:
            continue
        if name == "and":
            ok = all(_matches(view, f) for f in wanted)
        elif name == "or":
            ok = any(_matches(view, f) for f in wanted)
        elif name == "null":
            ok = (view is None) == wanted
        elif name == "labels":
            ok = _labels_match(_value(view, "labels")["nodes"], wanted)
        elif name in ("team", "state"):
            related = _value(view, name)
            ok = (
                related is None
                if wanted.get("null")
                else related is not None
                and _matches(related, {k: v for k, v in wanted.items() if k != "null"})
            )
        else:
            ok = _compare(view.get(name), wanted)
        if not ok:
            return False
    return True


def _labels_match(labels: list[dict[str, Any]], wanted: dict[str, Any]) -> bool:
    for name, value in wanted.items():
        if value is None:
            continue
        if name == "some":
            ok = any(_matches(lab, value) for lab in labels)
        elif name == "every":
            ok = all(_matches(lab, value) for lab in labels)
        elif name == "length":
            ok = _compare(float(len(labels)), value)
        elif name in ("and", "or"):
            results = [_labels_match(labels, f) for f in value]
            ok = all(results) if name == "and" else any(results)
        else:
            ok = any(_compare(lab.get(name), value) for lab in labels)
        if not ok:
            return False
    return True


def _filtered(views: list[dict[str, Any]], args: dict[str, Any]) -> list[dict[str, Any]]:
    return [v for v in views if _matches(v, args.get("filter"))]


def _connection(nodes: list[dict[str, Any]], args: dict[str, Any]) -> dict[str, Any]:
    """One page of ``nodes`` as ``first`` (Linear's default 50) and ``after`` ask."""
    size = args.get("first") or 50
    start = int(args["after"]) if args.get("after") else 0
    page = nodes[start : start + size]
    more = start + size < len(nodes)
    return {
        "nodes": page,
        "edges": [{"node": n, "cursor": str(start + i + 1)} for i, n in enumerate(page)],
        "pageInfo": {
            "hasPreviousPage": start > 0,
            "hasNextPage": more,
            "startCursor": str(start) if page else None,
            "endCursor": str(start + len(page)) if page else None,
        },
    }
