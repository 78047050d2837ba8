"""SHA-1 and SHA-256 for names and cache keys (never for security), without ``hashlib``: its
import initialises OpenSSL, about 2 ms of every ``cairn wip save``. CPython's own small modules
give the same digests; ``hashlib`` stands in where they are missing."""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a hot path)
if TYPE_CHECKING:
    from hashlib import _Hash
    from hashlib import sha1 as _sha1
    from hashlib import sha256 as _sha256
else:
    try:
        from _sha1 import sha1 as _sha1
        from _sha256 import sha256 as _sha256
    except ImportError:  # an interpreter built without them
        from hashlib import sha1 as _sha1
        from hashlib import sha256 as _sha256


def sha1(data: bytes = b"") -> _Hash:
    return _sha1(data, usedforsecurity=False)


def sha256(data: bytes = b"") -> _Hash:
    return _sha256(data, usedforsecurity=False)
