"""A fake GitHub REST server on 127.0.0.1 for the github tracker's tests, and a webhook receiver.

It implements only the endpoints cairn calls (issues listed by label, issue comments listed,
added and edited, issue labels added and removed, the repository's default branch, pull
requests found, opened and merged; a listing longer than a page names the next in a ``Link``
header, as GitHub does), records every request it gets (method, path, query, JSON body, status
answered), checks the bearer token, and can be told to answer the next matching request with a
502 or a rate limit (403 with ``X-RateLimit-Remaining: 0``, or 429 with ``Retry-After``). With
``remote`` (a bare repository) it refuses a pull request whose head branch was not pushed
there, as GitHub does, and merges one there (``PUT …/pulls/{n}/merge``: a merge commit with
real git, 405 when it conflicts, 409 when its head is not the ``sha`` asked).

It can also answer as no GitHub would, for the tracker's hostile-answer tests: ``listing`` is a
raw answer (status, headers, bytes) to every issue listing while it is set (a proxy's HTML
page, a cut body, a redirect), and ``odd`` are entries added to the listing as they are (an
issue without a number, with a negative or string number, a bare string).
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlencode, urlsplit

TOKEN = "ghp_fake_token_for_tests"
LOST = -1  # a fault's status: the request is done and its answer never sent
_KEY = re.compile(r"\n?<!-- (cairn:[^ ]+) -->")
PREFIX = "/api/v3"  # the API's base path, as on GitHub Enterprise


@dataclass
class Seen:
    method: str
    path: str
    query: dict[str, str]
    body: Any
    status: int


@dataclass
class Raw:
    """An answer sent as it is: any status, any headers, any bytes."""

    status: int
    headers: dict[str, str]
    data: bytes


@dataclass
class Fault:
    method: str
    path_part: str
    status: int
    headers: dict[str, str]
    message: str


@dataclass
class FakeGitHub:
    repo: str = "octo/app"
    remote: Path | None = None
    issues: dict[int, dict[str, Any]] = field(default_factory=dict)
    comments: list[tuple[int, str]] = field(default_factory=list)
    # each comment's author, their association with the repository, and when it was made,
    # by its id (its place in ``comments``, from 1)
    authors: dict[int, tuple[str, str, str]] = field(default_factory=dict)
    pulls: list[dict[str, Any]] = field(default_factory=list)
    reviews: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    seen: list[Seen] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    url: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)
    listing: Raw | None = None
    odd: list[Any] = field(default_factory=list)

    # --- set-up --------------------------------------------------------------------------------

    def add_issue(
        self, number: int, title: str, body: str, labels: tuple[str, ...] = ("cairn",)
    ) -> None:
        self.issues[number] = {
            "number": number,
            "title": title,
            "body": body,
            "state": "open",
            "labels": [{"name": name} for name in labels],
            "html_url": f"https://github.test/{self.repo}/issues/{number}",
        }

    def say(self, number: int, body: str, login: str = "ana", association: str = "OWNER") -> None:
        """A person comments on issue ``number`` (``association``: GitHub's
        ``author_association``, ``OWNER`` … ``NONE``)."""
        with self.lock:
            self.comments.append((number, body))
            self.authors[len(self.comments)] = (login, association, _now())

    def fail_once(self, method: str, path_part: str, status: int = 502) -> None:
        self.faults.append(Fault(method, path_part, status, {}, "Bad Gateway"))

    def lose_answer_once(self, method: str, path_part: str) -> None:
        """The next matching request is carried out, and its answer lost: the connection is
        closed before a byte of it is sent (what a dropped network does to a client)."""
        self.faults.append(Fault(method, path_part, LOST, {}, "answer lost"))

    def rate_limit_once(self, method: str, path_part: str, *, retry_after: int | None = 1) -> None:
        """The next matching request is rate-limited: 429 with ``Retry-After`` when given, else
        a primary rate limit (403, remaining 0, reset a minute away)."""
        if retry_after is not None:
            headers = {"Retry-After": str(retry_after)}
            self.faults.append(Fault(method, path_part, 429, headers, "secondary rate limit"))
        else:
            headers = {
                "X-RateLimit-Remaining": "0",
                "X-RateLimit-Reset": str(int(time.time()) + 60),
            }
            self.faults.append(Fault(method, path_part, 403, headers, "API rate limit exceeded"))

    # --- what it was asked ---------------------------------------------------------------------

    def requests(self, method: str | None = None, path_part: str = "") -> list[Seen]:
        with self.lock:
            return [
                s
                for s in self.seen
                if (method is None or s.method == method) and path_part in s.path
            ]

    def labels(self, number: int) -> list[str]:
        return sorted(label["name"] for label in self.issues[number]["labels"])

    def comments_on(self, number: int) -> list[str]:
        """Issue ``number``'s comments as a person reads them: without cairn's hidden key."""
        return [_KEY.sub("", body) for n, body in self.comments if n == number]

    def keys_on(self, number: int) -> list[str]:
        """The idempotency keys hidden in issue ``number``'s comments, one per comment
        (``-`` for a comment without one)."""
        keys = []
        for n, body in self.comments:
            if n == number:
                found = _KEY.search(body)
                keys.append(found.group(1) if found else "-")
        return keys

    # --- answering -----------------------------------------------------------------------------

    def answer(self, method: str, target: str, body: Any) -> tuple[int, dict[str, str], Any]:
        parts = urlsplit(target)
        path = unquote(parts.path).removeprefix(PREFIX)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        with self.lock:
            for fault in self.faults:
                if fault.method == method and fault.path_part in path:
                    self.faults.remove(fault)
                    if fault.status == LOST:  # done, and its answer lost
                        status, _ = self._route(method, path, query, body)
                        self.seen.append(Seen(method, path, query, body, status))
                        return LOST, {}, None
                    self.seen.append(Seen(method, path, query, body, fault.status))
                    return fault.status, fault.headers, {"message": fault.message}
            if self.listing is not None and method == "GET" and path.endswith("/issues"):
                self.seen.append(Seen(method, path, query, body, self.listing.status))
                return self.listing.status, self.listing.headers, self.listing
            status, payload = self._route(method, path, query, body)
            self.seen.append(Seen(method, path, query, body, status))
            return status, _next_link(self.url, path, query, payload), payload

    def _route(self, method: str, path: str, query: dict[str, str], body: Any) -> tuple[int, Any]:
        base = f"/repos/{self.repo}"
        if path == base and method == "GET":
            return 200, {"full_name": self.repo, "default_branch": "main"}
        if path == f"{base}/issues" and method == "GET":
            wanted = set(filter(None, query.get("labels", "").split(",")))
            found = [
                issue
                for _, issue in sorted(self.issues.items())
                if issue["state"] == "open"
                and wanted <= {label["name"] for label in issue["labels"]}
            ]
            return 200, found + self.odd
        if path.startswith(f"{base}/issues/comments/") and method == "PATCH":
            return self._edit_comment(path[len(f"{base}/issues/comments/") :], body)
        if path.startswith(f"{base}/issues/"):
            rest = path[len(f"{base}/issues/") :].split("/", 2)
            number = int(rest[0])
            if number not in self.issues:
                return 404, {"message": "Not Found"}
            issue = self.issues[number]
            if rest[1:] == [] and method == "GET":
                return 200, issue
            if rest[1:] == ["comments"] and method == "POST":
                self.comments.append((number, body["body"]))
                self.authors[len(self.comments)] = ("cairn-bot", "NONE", _now())
                return 201, {"id": len(self.comments), "body": body["body"]}
            if rest[1:] == ["comments"] and method == "GET":
                listed = [
                    {
                        "id": i,
                        "body": text,
                        "user": {"login": self.authors.get(i, ("cairn-bot", "", ""))[0]},
                        "author_association": self.authors.get(i, ("", "NONE", ""))[1],
                        "created_at": self.authors.get(i, ("", "", _now()))[2],
                    }
                    for i, (n, text) in enumerate(self.comments, 1)
                    if n == number
                ]
                return 200, _page(listed, query)
            if rest[1:] == ["labels"] and method == "POST":
                names = {label["name"] for label in issue["labels"]}
                for name in body["labels"]:
                    if name not in names:
                        issue["labels"].append({"name": name})
                return 200, issue["labels"]
            if len(rest) == 3 and rest[1] == "labels" and method == "DELETE":
                before = len(issue["labels"])
                issue["labels"] = [lab for lab in issue["labels"] if lab["name"] != rest[2]]
                if len(issue["labels"]) == before:
                    return 404, {"message": "Label does not exist"}
                return 200, issue["labels"]
        if path == f"{base}/pulls" and method == "GET":
            head = query.get("head", "")
            return 200, [p for p in self.pulls if f"{self.repo.split('/')[0]}:{p['head']}" == head]
        if path == f"{base}/pulls" and method == "POST":
            if self.remote is not None and not _has_branch(self.remote, body["head"]):
                return 422, {"message": "Validation Failed", "errors": [{"field": "head"}]}
            pull = {**body, "number": 100 + len(self.pulls), "state": "open"}
            pull["html_url"] = f"https://github.test/{self.repo}/pull/{pull['number']}"
            self.pulls.append(pull)
            return 201, pull
        if path.startswith(f"{base}/pulls/") and path.endswith("/reviews") and method == "GET":
            number = int(path[len(f"{base}/pulls/") : -len("/reviews")])
            return 200, _page([r for n, r in self.reviews if n == number], query)
        if path.startswith(f"{base}/pulls/") and path.endswith("/reviews") and method == "POST":
            number = int(path[len(f"{base}/pulls/") : -len("/reviews")])
            if not any(p["number"] == number for p in self.pulls):
                return 404, {"message": "Not Found"}
            if body.get("event") not in ("APPROVE", "REQUEST_CHANGES", "COMMENT"):
                return 422, {"message": "Validation Failed", "errors": [{"field": "event"}]}
            state = {"APPROVE": "APPROVED", "REQUEST_CHANGES": "CHANGES_REQUESTED"}
            review = {
                "id": 900 + len(self.reviews),
                "state": state.get(body["event"], "COMMENTED"),
                "body": body.get("body", ""),
                "html_url": f"https://github.test/{self.repo}/pull/{number}#pullrequestreview",
            }
            self.reviews.append((number, review))
            return 200, review
        if path.startswith(f"{base}/pulls/") and path.endswith("/merge") and method == "PUT":
            return self._merge(int(path.split("/")[-2]), body)
        return 404, {"message": "Not Found"}

    def _edit_comment(self, given: str, body: Any) -> tuple[int, Any]:
        """``PATCH /repos/{repo}/issues/comments/{id}``: the comment with its new body (200), or
        404 for a comment that does not exist, 422 for an edit without a body, as GitHub."""
        if not given.isdigit() or not 1 <= int(given) <= len(self.comments):
            return 404, {"message": "Not Found"}
        if not isinstance(body, dict) or not isinstance(body.get("body"), str):
            return 422, {"message": "Validation Failed", "errors": [{"field": "body"}]}
        comment_id = int(given)
        number, _ = self.comments[comment_id - 1]
        self.comments[comment_id - 1] = (number, body["body"])
        login = self.authors.get(comment_id, ("cairn-bot", "", ""))[0]
        return 200, {
            "id": comment_id,
            "body": body["body"],
            "user": {"login": login},
            "html_url": f"https://github.test/{self.repo}/issues/{number}#issuecomment-{comment_id}",
            "updated_at": _now(),
        }

    def _merge(self, number: int, body: Any) -> tuple[int, Any]:
        pull = next((p for p in self.pulls if p["number"] == number), None)
        if pull is None:
            return 404, {"message": "Not Found"}
        not_mergeable = 405, {"message": "Pull Request is not mergeable"}
        if pull["state"] != "open" or self.remote is None:
            return not_mergeable
        remote = str(self.remote)
        head = _git(remote, "rev-parse", f"refs/heads/{pull['head']}").strip()
        if body.get("sha") and body["sha"] != head:
            return 409, {"message": "Head branch was modified. Review and try the merge again."}
        ref = f"refs/heads/{pull['base']}"
        old = _git(remote, "rev-parse", ref).strip()
        tree = _git(remote, "merge-tree", "--write-tree", old, head, check=False)
        if tree is None:
            return not_mergeable
        message = f"{body.get('commit_title', '')}\n\n{body.get('commit_message', '')}"
        new = _git(remote, "commit-tree", tree.split()[0], "-p", old, "-p", head, "-m", message)
        _git(remote, "update-ref", ref, new.strip(), old)
        pull.update(state="closed", merged=True, merged_at="2026-12-03T10:00:00Z")
        return 200, {
            "sha": new.strip(),
            "merged": True,
            "message": "Pull Request successfully merged",
        }


def _now() -> str:
    """Now as GitHub writes times: ``2026-12-03T13:45:00Z``."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class Page(list[Any]):
    """One page of a listing, and whether another follows it."""

    more: bool = False


def _page(entries: list[Any], query: dict[str, str]) -> Page:
    """One page of a listing, as ``per_page`` and ``page`` ask (GitHub's defaults: 30, 1)."""
    size = int(query.get("per_page", "30"))
    first = (int(query.get("page", "1")) - 1) * size
    page = Page(entries[first : first + size])
    page.more = len(entries) > first + size
    return page


def _next_link(url: str, path: str, query: dict[str, str], payload: Any) -> dict[str, str]:
    """GitHub's ``Link`` header naming the next page of a listing that has one."""
    if not isinstance(payload, Page) or not payload.more:
        return {}
    after = urlencode({**query, "page": str(int(query.get("page", "1")) + 1)})
    return {"Link": f'<{url}{path}?{after}>; rel="next"'}


def _git(remote: str, *args: str, check: bool = True) -> Any:
    """``git -C remote args``'s output; None when it fails and ``check`` is off."""
    identity = {"GIT_AUTHOR_NAME": "GitHub", "GIT_AUTHOR_EMAIL": "noreply@github.test"}
    env = {**identity, "GIT_COMMITTER_NAME": "GitHub", "GIT_COMMITTER_EMAIL": "noreply@github.test"}
    done = subprocess.run(
        ["git", "-C", remote, *args], capture_output=True, text=True, check=False, env=env
    )
    if done.returncode != 0:
        if check:
            raise RuntimeError(f"git {' '.join(args)}: {done.stderr}")
        return None
    return done.stdout


def _has_branch(remote: Path, branch: str) -> bool:
    done = subprocess.run(
        ["git", "-C", str(remote), "rev-parse", "--verify", "-q", f"refs/heads/{branch}"],
        capture_output=True,
        check=False,
    )
    return done.returncode == 0


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        headers: dict[str, str]
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            status, headers, payload = 401, {}, {"message": "Bad credentials"}
        else:
            status, headers, payload = self.server.fake.answer(self.command, self.path, body)
            if status == LOST:
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
        data = payload.data if isinstance(payload, Raw) else json.dumps(payload).encode()
        self.send_response(status)
        if not isinstance(payload, Raw) or "Content-Type" not in headers:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_DELETE = do_PATCH = do_PUT = _serve


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeGitHub


def serve(fake: FakeGitHub) -> Iterator[FakeGitHub]:
    """Serve ``fake`` on 127.0.0.1 (a free port) for the duration of the generator."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.fake = fake
    fake.url = f"http://127.0.0.1:{server.server_address[1]}{PREFIX}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()


# --- the webhook receiver -------------------------------------------------------------------------


@dataclass
class Receiver:
    posts: list[dict[str, Any]] = field(default_factory=list)
    keys: list[str | None] = field(default_factory=list)  # each post's Idempotency-Key header
    failures: list[int] = field(default_factory=list)  # statuses to answer first, in order
    answered: list[int] = field(default_factory=list)
    url: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)


class _HookHandler(BaseHTTPRequestHandler):
    server: _HookServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length))
        receiver = self.server.receiver
        with receiver.lock:
            status = receiver.failures.pop(0) if receiver.failures else 204
            receiver.answered.append(status)
            if status < 300:
                receiver.posts.append(body)
                receiver.keys.append(self.headers.get("Idempotency-Key"))
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()


class _HookServer(ThreadingHTTPServer):
    daemon_threads = True
    receiver: Receiver


def receive(receiver: Receiver) -> Iterator[Receiver]:
    server = _HookServer(("127.0.0.1", 0), _HookHandler)
    server.receiver = receiver
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/cairn"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
