"""The connection to Temporal every cairn command and worker makes: ``[temporal] address`` and
``namespace``, with TLS (the system's roots), mutual TLS (``tls_cert`` and ``tls_key``) or an API
key read from the environment variable ``api_key_env`` names (Temporal Cloud)."""

from __future__ import annotations

import os
from pathlib import Path

from temporalio.client import Client
from temporalio.service import TLSConfig

from cairn.config import TemporalConfig
from cairn.errors import BadInput


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
