"""A small client of Linear's GraphQL API: the queries and mutations the ``linear`` tracker
makes, nothing more.

A personal API key is sent as it is (``Authorization: lin_api_…``, no ``Bearer``: Linear takes
``Bearer`` for OAuth tokens only); a key given as ``Bearer lin_api_…`` has the prefix taken off.

Every call is retried with backoff when Linear answers 5xx or the connection fails: 0.5 s, 1 s,
2 s. A rate limit (HTTP 429, or a GraphQL error whose ``extensions.code`` is ``RATELIMITED`` or
whose ``extensions.type`` is ``ratelimited``, whatever the HTTP status: Linear answers 400) is
waited out as ``Retry-After`` (seconds) or the ``X-RateLimit-*-Reset`` headers (epoch
milliseconds) say; a wait longer than ``max_wait`` is not slept through: ``RateLimited`` says
until when, and the caller (the outbox) tries again after that.

A mutation that creates something (a comment, an attachment) is retried in place only when
Linear cannot have acted on it: the connection was never made, or a rate limit refused it.
After a 5xx, a timeout or a lost answer its outcome is unknown, and it raises: the outbox keeps
the message, and looks for it before it sends it again.

An answer that is not JSON, has no ``data``, carries ``errors`` or is not in the shape asked
for is a ``LinearError`` naming what came instead.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cairn import __version__

if TYPE_CHECKING:
    import httpx2 as httpx

PAGE = 50  # Linear's own page size
PAGE_LIMIT = 40  # 2,000 issues: more than any label's open issues a fleet drains
KEY_ENV = "LINEAR_API_KEY"
KEYS_PAGE = "https://linear.app/settings/account/security"  # where a personal key is made
_ISSUE_FIELDS = "id identifier title description url state { id name type }"


class LinearError(Exception):
    """A call that did not succeed; ``status`` is the HTTP status (None: no answer), ``kind``
    the GraphQL error's ``extensions.type`` or ``code`` when it had one."""

    def __init__(
        self,
        message: str,
        status: int | None = None,
        until: float | None = None,
        kind: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.until = until  # epoch seconds before which another try is pointless
        self.kind = kind

    @property
    def refused_key(self) -> bool:
        """Whether Linear refused the key itself (a retry will not change it)."""
        kind = (self.kind or "").lower().replace("_", " ")
        return self.status in (401, 403) or kind in ("authentication error", "forbidden")


class RateLimited(LinearError):
    pass


def key_of(raw: str) -> str:
    """The key to send: a personal key given as ``Bearer lin_api_…`` loses the prefix."""
    key = raw.strip()
    if key[:7].lower() == "bearer " and key[7:].strip().startswith("lin_api_"):
        return key[7:].strip()
    return key


class LinearAPI:
    def __init__(
        self,
        api_url: str,
        key: str,
        *,
        attempts: int = 4,
        backoff: float = 0.5,
        max_wait: float = 15.0,
        timeout: float = 15.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        import httpx2 as httpx  # only when a linear tracker is opened

        self.url = api_url
        self.attempts, self.backoff, self.max_wait, self.sleep = attempts, backoff, max_wait, sleep
        self.client = httpx.Client(
            timeout=timeout,
            headers={
                "Authorization": key_of(key),
                "Content-Type": "application/json",
                "User-Agent": f"cairn/{__version__}",
            },
        )

    def close(self) -> None:
        self.client.close()

    # --- the calls the tracker makes ----------------------------------------------------------

    def teams(self) -> list[dict[str, Any]]:
        """Every team the key sees: ``{id, key, name}``."""
        query = """query Teams($after: String) {
          teams(first: 50, after: $after) {
            nodes { id key name } pageInfo { hasNextPage endCursor }
          }
        }"""
        return self._pages(query, {}, ("teams",))

    def team(self, key: str) -> dict[str, Any] | None:
        """The team whose key is ``key``, with its workflow states (``{id, name, type}``)."""
        query = """query Team($key: String!) {
          teams(filter: { key: { eq: $key } }) {
            nodes { id key name states(first: 100) { nodes { id name type } } }
          }
        }"""
        nodes = _nodes(self.call(query, {"key": key}), ("teams",))
        return nodes[0] if nodes else None

    def labels(self, name: str) -> list[dict[str, Any]]:
        """The issue labels named ``name`` (any team's, or the workspace's)."""
        query = """query Labels($name: String!) {
          issueLabels(filter: { name: { eq: $name } }) { nodes { id name team { key } } }
        }"""
        return _nodes(self.call(query, {"name": name}), ("issueLabels",))

    def issues(self, team: str, label: str, types: list[str]) -> list[Any]:
        """The issues of team ``team`` carrying ``label`` whose state's type is one of
        ``types``, oldest first, as Linear gave them: the tracker checks each."""
        params = "$team: String!, $label: String!, $types: [String!], $after: String"
        query = f"""query Issues({params}) {{
          issues(first: {PAGE}, after: $after, filter: {{
            team: {{ key: {{ eq: $team }} }},
            labels: {{ some: {{ name: {{ eq: $label }} }} }},
            state: {{ type: {{ in: $types }} }}
          }}) {{ nodes {{ {_ISSUE_FIELDS} }} pageInfo {{ hasNextPage endCursor }} }}
        }}"""
        variables = {"team": team, "label": label, "types": types}
        return self._pages(query, variables, ("issues",), checked=False)

    def issue(self, identifier: str) -> dict[str, Any] | None:
        """The issue ``identifier`` (``IDE-210``, or its id); None when Linear has none."""
        query = f"query Issue($id: String!) {{ issue(id: $id) {{ {_ISSUE_FIELDS} }} }}"
        try:
            data = self.call(query, {"id": identifier})
        except LinearError as exc:
            if (exc.kind or "").lower().replace("_", " ") in ("entity not found", "invalid input"):
                return None
            raise
        found = data.get("issue")
        if found is not None and not isinstance(found, dict):
            raise LinearError(f"issue {identifier}: the answer is not an issue")
        return found

    def comments(self, issue: str) -> list[dict[str, Any]]:
        """Issue ``issue``'s comments (``{id, body, createdAt, user}``), every page."""
        query = """query Comments($id: String!, $after: String) {
          issue(id: $id) {
            comments(first: 50, after: $after) {
              nodes { id body createdAt user { name } } pageInfo { hasNextPage endCursor }
            }
          }
        }"""
        return self._pages(query, {"id": issue}, ("issue", "comments"))

    def comment(self, issue: str, body: str, comment_id: str | None = None) -> None:
        """Post ``body`` on the issue; ``comment_id`` (a UUID) names the comment, so one posted
        already is found by it (Linear takes a client's id for a new comment)."""
        query = """mutation Comment($input: CommentCreateInput!) {
          commentCreate(input: $input) { success comment { id } }
        }"""
        fields = {"issueId": issue, "body": body}
        variables = {"input": fields | ({"id": comment_id} if comment_id else {})}
        _succeeded(self.call(query, variables, creates=True), "commentCreate")

    def move(self, issue: str, state_id: str) -> None:
        """Move the issue to the workflow state ``state_id`` (idempotent: a state is set)."""
        query = """mutation Move($id: String!, $input: IssueUpdateInput!) {
          issueUpdate(id: $id, input: $input) { success issue { id state { id name } } }
        }"""
        variables = {"id": issue, "input": {"stateId": state_id}}
        _succeeded(self.call(query, variables), "issueUpdate")

    def attach(self, issue: str, url: str, title: str, subtitle: str) -> None:
        """Link ``url`` on the issue; Linear updates the attachment of the same url and issue,
        so sending it again changes nothing."""
        query = """mutation Attach($input: AttachmentCreateInput!) {
          attachmentCreate(input: $input) { success attachment { id url } }
        }"""
        variables = {"input": {"issueId": issue, "url": url, "title": title, "subtitle": subtitle}}
        _succeeded(self.call(query, variables, creates=True), "attachmentCreate")

    def _pages(
        self, query: str, variables: dict[str, Any], path: tuple[str, ...], checked: bool = True
    ) -> list[Any]:
        found: list[Any] = []
        after: str | None = None
        for _ in range(PAGE_LIMIT):
            data = self.call(query, {**variables, "after": after})
            connection = _at(data, path)
            nodes = connection.get("nodes")
            if not isinstance(nodes, list):
                raise LinearError(f"{'.'.join(path)}: the answer has no list of nodes")
            found += [n for n in nodes if isinstance(n, dict)] if checked else nodes
            page = connection.get("pageInfo")
            if not isinstance(page, dict) or page.get("hasNextPage") is not True:
                break
            after = page.get("endCursor")
            if not isinstance(after, str):
                break
        return found

    # --- the request ---------------------------------------------------------------------------

    def call(
        self, query: str, variables: dict[str, Any], *, creates: bool = False
    ) -> dict[str, Any]:
        """One GraphQL operation, retried; its ``data``. ``creates``: retried only when Linear
        cannot have acted on it."""
        import httpx2 as httpx

        name = (query.split("(", 1)[0].split("{", 1)[0].split() or ["query"])[-1]
        for attempt in range(self.attempts):
            last = attempt == self.attempts - 1
            try:
                response = self.client.post(self.url, json={"query": query, "variables": variables})
            except httpx.TransportError as exc:
                unsent = isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout)
                if last or (creates and not unsent):
                    raise LinearError(f"{name}: {exc or type(exc).__name__}") from None
                self.sleep(self.backoff * 2**attempt)
                continue
            body = _json(response)
            limited = _rate_limited(response.status_code, body)
            if not limited and response.status_code < 500:
                return _data(name, response, body)
            wait = self._wait(response, attempt, limited)
            until = time.time() + wait
            if limited:
                error: LinearError = RateLimited(
                    f"{name}: rate limited by Linear (HTTP {response.status_code})",
                    response.status_code,
                    until,
                    "ratelimited",
                )
            else:
                error = LinearError(f"{name}: HTTP {response.status_code}", response.status_code)
            if last or wait > self.max_wait or (creates and not limited):
                raise error
            self.sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover

    def _wait(self, response: httpx.Response, attempt: int, limited: bool) -> float:
        headers = response.headers
        after = headers.get("retry-after", "").strip()
        if after.isdigit():
            return float(after)
        if limited:
            resets = []
            for budget in ("requests", "complexity"):
                reset = headers.get(f"x-ratelimit-{budget}-reset", "").strip()
                left = headers.get(f"x-ratelimit-{budget}-remaining", "").strip()
                if reset.isdigit() and left in ("0", ""):
                    resets.append(int(reset) / 1000 - time.time())  # epoch milliseconds
            if resets:
                return float(max(1.0, *resets))
            return self.backoff * float(2**attempt) * 60
        return self.backoff * float(2**attempt)


_NOT_JSON = object()


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return _NOT_JSON


def _first_error(body: Any) -> dict[str, Any] | None:
    errors = body.get("errors") if isinstance(body, dict) else None
    if isinstance(errors, list) and errors and isinstance(errors[0], dict):
        return errors[0]
    return None


def _rate_limited(status: int, body: Any) -> bool:
    if status == 429:
        return True
    error = _first_error(body)
    extensions = error.get("extensions") if error else None
    if not isinstance(extensions, dict):
        return False
    return extensions.get("code") == "RATELIMITED" or extensions.get("type") == "ratelimited"


def _data(name: str, response: httpx.Response, body: Any) -> dict[str, Any]:
    status = response.status_code
    if body is _NOT_JSON:
        kind = response.headers.get("content-type", "no content type").split(";")[0]
        start = " ".join(response.text[:60].split())
        raise LinearError(
            f"{name}: the answer is not JSON ({kind}, {len(response.content)} bytes: {start!r})",
            status,
        )
    error = _first_error(body)
    if error is not None:
        found = error.get("extensions")
        extensions: dict[str, Any] = found if isinstance(found, dict) else {}
        code = extensions.get("type") or extensions.get("code")
        message = " ".join(str(error.get("message", "")).split())[:200]
        raise LinearError(
            f"{name}: HTTP {status}, {message or 'an error'}",
            status,
            kind=str(code) if code else None,
        )
    if status >= 400:
        raise LinearError(f"{name}: HTTP {status}", status)
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, dict):
        raise LinearError(f"{name}: the answer has no data (a JSON {type(body).__name__})", status)
    return data


def _at(data: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    found: Any = data
    for part in path:
        found = found.get(part) if isinstance(found, dict) else None
    if not isinstance(found, dict):
        raise LinearError(f"{'.'.join(path)}: the answer is not in the shape asked for")
    return found


def _nodes(data: dict[str, Any], path: tuple[str, ...]) -> list[dict[str, Any]]:
    nodes = _at(data, path).get("nodes")
    if not isinstance(nodes, list):
        raise LinearError(f"{'.'.join(path)}: the answer has no list of nodes")
    return [n for n in nodes if isinstance(n, dict)]


def _succeeded(data: dict[str, Any], name: str) -> None:
    payload = data.get(name)
    if not isinstance(payload, dict) or payload.get("success") is not True:
        raise LinearError(f"{name}: Linear did not say it succeeded")
