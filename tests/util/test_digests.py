"""cairn's SHA-1 and SHA-256 give hashlib's digests (they name caches and scratch directories)."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import pytest

from cairn.util.digests import sha1, sha256


@pytest.mark.parametrize("data", [b"", b"x", bytes(range(256)) * 64])
def test_the_same_digests_as_hashlib(data: bytes) -> None:
    assert sha1(data).hexdigest() == hashlib.sha1(data).hexdigest()
    assert sha256(data).hexdigest() == hashlib.sha256(data).hexdigest()
    h = sha1()
    h.update(data[:3])
    h.update(data[3:])
    assert h.hexdigest() == hashlib.sha1(data).hexdigest()


def test_a_save_does_not_import_hashlib() -> None:
    code = "import sys, cairn.wip.saving; print('hashlib' in sys.modules)"
    assert (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout
        == "False\n"
    )
