"""A small client of GitHub's REST API: the calls the ``github`` tracker makes, nothing more.

Every call is retried with backoff when GitHub answers 5xx, 429 or a rate-limit 403, or the
connection fails: it waits what ``Retry-After`` or ``X-RateLimit-Reset`` says, else 0.5 s,
1 s, 2 s. A wait longer than ``max_wait`` is not slept through: ``RateLimited`` says until
when, and the caller (the outbox) tries again after that.

A call that creates something (a comment, a pull request, a review) is retried in place only
when GitHub cannot have acted on it: the connection was never made, or a rate limit refused
it. After a 5xx, a timeout or a lost answer its outcome is unknown, and it raises: the outbox
keeps the message, and looks for it before it sends it again.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cairn import __version__

if TYPE_CHECKING:
    import httpx2 as httpx

_NEXT = re.compile(r'<([^>]+)>;\s*rel="next"')
PAGE_LIMIT = 20  # 2,000 issues: more than any label's open issues a fleet drains


class GitHubError(Exception):
    """A call that did not succeed; ``status`` is the HTTP status (None: no answer)."""

    def __init__(self, message: str, status: int | None = None, until: float | None = None):
        super().__init__(message)
        self.status = status
        self.until = until  # epoch seconds before which another try is pointless


class RateLimited(GitHubError):
    pass


class GitHubAPI:
    def __init__(
        self,
        api_url: str,
        repo: str,
        token: str,
        *,
        attempts: int = 4,
        backoff: float = 0.5,
        max_wait: float = 15.0,
        timeout: float = 15.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        import httpx2 as httpx  # only when a github tracker is opened

        self.repo = repo
        self.attempts, self.backoff, self.max_wait, self.sleep = attempts, backoff, max_wait, sleep
        self.client = httpx.Client(
            base_url=api_url.rstrip("/"),
            timeout=timeout,
            headers={
                "Authorization": f"Bearer {token}",
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": "2022-11-28",
                "User-Agent": f"cairn/{__version__}",
            },
        )

    def close(self) -> None:
        self.client.close()

    # --- the calls the tracker makes ----------------------------------------------------------

    def open_issues(self, label: str) -> list[Any]:
        """The open issues carrying ``label`` (pull requests left out), oldest first, as GitHub
        gave them: the tracker checks each. An answer that is not a JSON list is an error."""
        url: str | None = f"/repos/{self.repo}/issues"
        params: dict[str, Any] | None = {
            "state": "open",
            "labels": label,
            "per_page": 100,
            "sort": "created",
            "direction": "asc",
        }
        found: list[dict[str, Any]] = []
        for _ in range(PAGE_LIMIT):
            if url is None:
                break
            response = self.request("GET", url, params=params)
            page = json_of(response, f"GET {url}")
            if not isinstance(page, list):
                raise GitHubError(
                    f"GET {url}: the answer is a JSON {type(page).__name__}, not a list of issues",
                    response.status_code,
                )
            found += [i for i in page if not (isinstance(i, dict) and "pull_request" in i)]
            match = _NEXT.search(response.headers.get("link", ""))
            url, params = (match.group(1) if match else None), None
        return found

    def issue(self, number: int) -> dict[str, Any]:
        """Issue ``number`` (its ``title``, ``body``, …); empty when the answer is no object."""
        url = f"/repos/{self.repo}/issues/{number}"
        found = json_of(self.request("GET", url), f"GET {url}")
        return found if isinstance(found, dict) else {}

    def comment(self, number: int, body: str) -> None:
        url = f"/repos/{self.repo}/issues/{number}/comments"
        self.request("POST", url, json={"body": body}, creates=True)

    def edit_comment(self, comment_id: int, body: str) -> dict[str, Any]:
        """Replace comment ``comment_id``'s body (``PATCH /repos/{repo}/issues/comments/{id}``):
        GitHub's answer, the comment. Retried like a read: the same edit twice is one edit."""
        url = f"/repos/{self.repo}/issues/comments/{comment_id}"
        found = json_of(self.request("PATCH", url, json={"body": body}), f"PATCH {url}")
        return found if isinstance(found, dict) else {}

    def comments(self, number: int, *, until: float | None = None) -> list[dict[str, Any]]:
        """Issue ``number``'s comments, oldest first (every page, up to ``PAGE_LIMIT``);
        ``until``: a ``time.monotonic()`` past which no further page is asked for (a
        ``GitHubError``)."""
        url = f"/repos/{self.repo}/issues/{number}/comments"
        return self._pages(url, "comments", until)

    def reviews(self, number: int) -> list[dict[str, Any]]:
        """Pull request ``number``'s reviews, oldest first."""
        return self._pages(f"/repos/{self.repo}/pulls/{number}/reviews", "reviews")

    def _pages(self, first: str, what: str, until: float | None = None) -> list[dict[str, Any]]:
        url: str | None = first
        params: dict[str, Any] | None = {"per_page": 100}
        found: list[dict[str, Any]] = []
        for _ in range(PAGE_LIMIT):
            if url is None:
                break
            if until is not None and time.monotonic() > until:
                raise GitHubError(f"GET {first}: out of time after {len(found)} {what}")
            response = self.request("GET", url, params=params)
            page = json_of(response, f"GET {url}")
            if not isinstance(page, list):
                raise GitHubError(f"GET {url}: the answer is not a list of {what}")
            found += [entry for entry in page if isinstance(entry, dict)]
            match = _NEXT.search(response.headers.get("link", ""))
            url, params = (match.group(1) if match else None), None
        return found

    def add_labels(self, number: int, labels: list[str]) -> None:
        self.request("POST", f"/repos/{self.repo}/issues/{number}/labels", json={"labels": labels})

    def remove_label(self, number: int, label: str) -> None:
        """Take ``label`` off the issue; one it does not carry is fine."""
        from urllib.parse import quote

        try:
            self.request(
                "DELETE", f"/repos/{self.repo}/issues/{number}/labels/{quote(label, safe='')}"
            )
        except GitHubError as exc:
            if exc.status != 404:
                raise

    def default_branch(self) -> str:
        url = f"/repos/{self.repo}"
        found = json_of(self.request("GET", url), f"GET {url}")
        branch = found.get("default_branch") if isinstance(found, dict) else None
        if not isinstance(branch, str) or not branch:
            raise GitHubError(f"GET {url}: the answer names no default branch")
        return branch

    def find_pull(self, branch: str) -> dict[str, Any] | None:
        """The pull request (open or closed) from ``branch`` of this repository, if any."""
        owner = self.repo.split("/")[0]
        url = f"/repos/{self.repo}/pulls"
        params = {"head": f"{owner}:{branch}", "state": "all"}
        found = json_of(self.request("GET", url, params=params), f"GET {url}")
        if not isinstance(found, list):
            raise GitHubError(f"GET {url}: the answer is not a list of pull requests")
        return found[0] if found and isinstance(found[0], dict) else None

    def open_pull(
        self, *, title: str, head: str, base: str, body: str, draft: bool
    ) -> dict[str, Any]:
        payload = {"title": title, "head": head, "base": base, "body": body, "draft": draft}
        url = f"/repos/{self.repo}/pulls"
        pull = json_of(self.request("POST", url, json=payload, creates=True), f"POST {url}")
        return pull if isinstance(pull, dict) else {}

    def approve_pull(self, number: int, body: str) -> dict[str, Any]:
        """An approving review on pull request ``number`` (``event`` ``APPROVE``)."""
        url = f"/repos/{self.repo}/pulls/{number}/reviews"
        payload = {"event": "APPROVE", "body": body}
        review = json_of(self.request("POST", url, json=payload, creates=True), f"POST {url}")
        return review if isinstance(review, dict) else {}

    def merge_pull(self, number: int, *, sha: str, title: str, message: str) -> dict[str, Any]:
        """Merge pull request ``number`` with a merge commit, only while its head is ``sha``
        (``PUT /repos/{repo}/pulls/{number}/merge``): GitHub's answer, ``{"sha", "merged",
        "message"}``. A ``GitHubError`` with status 405 (not mergeable) or 409 (its head
        moved) when GitHub refuses it."""
        payload = {"commit_title": title, "commit_message": message, "sha": sha}
        url = f"/repos/{self.repo}/pulls/{number}/merge"
        found = json_of(self.request("PUT", url, json={**payload, "merge_method": "merge"}), url)
        return found if isinstance(found, dict) else {}

    # --- one request, retried -------------------------------------------------------------------

    def request(
        self,
        method: str,
        url: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        creates: bool = False,
    ) -> httpx.Response:
        """One call, retried; ``creates``: retried only when GitHub cannot have acted on it."""
        import httpx2 as httpx

        for attempt in range(self.attempts):
            last = attempt == self.attempts - 1
            try:
                response = self.client.request(method, url, json=json, params=params)
            except httpx.TransportError as exc:
                unsent = isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout)
                if last or (creates and not unsent):
                    raise GitHubError(f"{method} {url}: {exc or type(exc).__name__}") from None
                self.sleep(self.backoff * 2**attempt)
                continue
            if 300 <= response.status_code < 400:  # not followed: the API never redirects a call
                where = response.headers.get("location") or "nowhere"
                raise GitHubError(
                    f"{method} {url}: HTTP {response.status_code}, a redirect to {where}; point "
                    "[fleet.github] api_url at the API itself",
                    response.status_code,
                )
            if response.status_code < 400:
                return response
            wait, limited = self._retry_wait(response, attempt)
            error = _error(method, url, response, limited, wait)
            if wait is None or last or wait > self.max_wait or (creates and not limited):
                raise error
            self.sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover

    def _retry_wait(self, response: httpx.Response, attempt: int) -> tuple[float | None, bool]:
        """How long to wait before trying again (None: an answer a retry will not change), and
        whether it is a rate limit."""
        status = response.status_code
        headers = response.headers
        limited = status == 429 or (
            status == 403
            and (
                headers.get("x-ratelimit-remaining") == "0"
                or "retry-after" in headers
                or "rate limit" in response.text.lower()
            )
        )
        if not limited and status < 500:
            return None, False
        after = headers.get("retry-after", "")
        if after.strip().isdigit():
            return float(after), limited
        reset = headers.get("x-ratelimit-reset", "")
        if limited and reset.isdigit() and headers.get("x-ratelimit-remaining") == "0":
            return max(1.0, int(reset) - time.time()), limited
        return self.backoff * 2**attempt * (60 if limited else 1), limited


def json_of(response: httpx.Response, call: str) -> Any:
    """The JSON of an answer; one that is not JSON (a proxy's HTML page, a cut body) is a
    ``GitHubError`` naming what came instead."""
    try:
        return response.json()
    except ValueError:
        kind = response.headers.get("content-type", "no content type").split(";")[0]
        start = " ".join(response.text[:60].split())
        raise GitHubError(
            f"{call}: the answer is not JSON ({kind}, {len(response.content)} bytes: {start!r})",
            response.status_code,
        ) from None


def _error(
    method: str, url: str, response: httpx.Response, limited: bool, wait: float | None
) -> GitHubError:
    try:
        data = response.json()
        message = str(data.get("message", "")) if isinstance(data, dict) else ""
    except ValueError:
        message = response.text[:200]
    message = " ".join(message.split())[:200]  # one line
    text = f"{method} {url}: HTTP {response.status_code}" + (f" ({message})" if message else "")
    until = time.time() + wait if wait is not None else None
    kind = RateLimited if limited else GitHubError
    return kind(text, response.status_code, until)
