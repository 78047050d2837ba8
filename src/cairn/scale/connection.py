"""The connection to Temporal every cairn command and worker makes: ``[temporal] address`` and
``namespace``, with TLS (the system's roots), mutual TLS (``tls_cert`` and ``tls_key``) or an API
key read from the environment variable ``api_key_env`` names (Temporal Cloud); and the patience
of a command that waits on it (``Outage``: a Temporal restart is waited out, not an error)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path

from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode, TLSConfig

from cairn.config.records import TemporalConfig
from cairn.errors import BadInput
from cairn.terms import ENV_TEMPORAL_RECONNECT_CAP


def tls_of(config: TemporalConfig) -> bool | TLSConfig:
    if config.tls_cert is None or config.tls_key is None:
        return config.tls or config.api_key_env is not None
    return TLSConfig(
        client_cert=_read(config.tls_cert, "tls_cert"),
        client_private_key=_read(config.tls_key, "tls_key"),
    )


def api_key_of(config: TemporalConfig) -> str | None:
    if config.api_key_env is None:
        return None
    key = os.environ.get(config.api_key_env, "").strip()
    if not key:
        raise BadInput(
            f"[temporal] api_key_env names {config.api_key_env}, which is not set; export the "
            "API key in it"
        )
    return key


async def connect(config: TemporalConfig) -> Client:
    return await Client.connect(
        config.address,
        namespace=config.namespace,
        tls=tls_of(config),
        api_key=api_key_of(config),
    )


def _read(path: str, key: str) -> bytes:
    try:
        return Path(path).expanduser().read_bytes()
    except OSError as exc:
        raise BadInput(
            f"cannot read [temporal] {key} {path} ({exc.strerror}); fix the path in cairn.toml"
        ) from None


# What a Temporal that went away (restarting, unreachable) answers: worth asking again.
TRANSIENT = frozenset(
    {
        RPCStatusCode.UNAVAILABLE,
        RPCStatusCode.DEADLINE_EXCEEDED,
        RPCStatusCode.UNKNOWN,
        RPCStatusCode.CANCELLED,
        RPCStatusCode.INTERNAL,
        RPCStatusCode.RESOURCE_EXHAUSTED,
        RPCStatusCode.ABORTED,
    }
)
RECONNECT_CAP = float(os.environ.get(ENV_TEMPORAL_RECONNECT_CAP, "") or 10.0)


def transient(exc: BaseException) -> bool:
    return isinstance(exc, RPCError) and exc.status in TRANSIENT


class Outage:
    """Waiting out a Temporal that does not answer: a capped backoff, said once per outage
    (``say(kind, text, **fields)``, as ``cairn fleet start`` emits its events)."""

    def __init__(self, address: str, say: Callable[..., None], cap: float = RECONNECT_CAP) -> None:
        self.address, self.say, self.cap = address, say, cap
        self.delay = 0.0  # 0: no outage now

    async def wait(self, exc: BaseException) -> None:
        if self.delay == 0.0:
            why = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
            self.say(
                "temporal_unreachable",
                "temporal unreachable at {address}; retrying every {seconds:g}s ({why})",
                address=self.address,
                seconds=self.cap,
                why=why,
            )
        self.delay = min(self.cap, max(0.5, self.delay * 2))
        await asyncio.sleep(self.delay)

    def over(self) -> None:
        if self.delay != 0.0:
            self.delay = 0.0
            self.say(
                "temporal_reachable", "temporal reachable again at {address}", address=self.address
            )
