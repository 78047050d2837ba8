"""``cairn.util.tuples.NamedTuple``: one annotated declaration, a ``collections.namedtuple`` at
run time, without ``typing``."""

from __future__ import annotations

import pickle
import subprocess
import sys

import pytest

from cairn.git.result import GitResult
from cairn.state.layout import Artifact, Layout
from cairn.util.tuples import NamedTuple


class Pair(NamedTuple):
    left: int
    right: str = "r"

    def joined(self) -> str:
        return f"{self.left}{self.right}"


def test_fields_defaults_methods_and_tuple_behaviour() -> None:
    pair = Pair(1)
    assert pair == (1, "r") and pair.joined() == "1r" and Pair._fields == ("left", "right")
    assert repr(pair) == "Pair(left=1, right='r')" and pair._replace(left=2) == Pair(2, "r")
    assert not hasattr(pair, "__dict__")  # slots, as typing's
    assert pickle.loads(pickle.dumps(Artifact(1, "coder", "x", None))) == (1, "coder", "x", None)  # type: ignore[arg-type]
    assert repr(GitResult(["status"], 0, b"", b"")).startswith("GitResult(")


def test_a_field_without_a_default_after_one_with_a_default_is_refused() -> None:
    with pytest.raises(TypeError, match="follows one with a default"):

        class Bad(NamedTuple):
            first: int = 0
            second: int  # type: ignore[misc]  # mypy refuses it too


def test_the_tuples_load_no_typing() -> None:
    code = "import sys; import cairn.state.layout, cairn.git.runner; print('typing' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
    assert Layout.__mro__[1].__name__ == "Layout"  # built by collections.namedtuple
