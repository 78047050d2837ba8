"""cairn: interruption-proof runs for AI coding agents.

msgspec, cairn's records library, resolves a record's annotations with ``typing_extensions``'
``get_type_hints`` when that module can be imported, and it can: pydantic, which the MCP SDK
needs, installs it. Importing it costs a command ``inspect``, ``ast``, ``dis`` and ``tokenize``
(about 15 ms a call on a slow machine, on every ``task done`` and snapshot). On Python 3.11 and
later, ``typing``'s ``get_type_hints`` reads cairn's records the same, so while msgspec loads,
``typing_extensions`` is not found for it; any other importer, before or after, finds it as
usual. ``tests/test_imports.py`` checks both.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a hot path)
if TYPE_CHECKING:
    from collections.abc import Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType

__version__ = "0.1.0"


class _TypingExtensionsNotForMsgspec:
    """A finder asked first for every module not yet imported: ``typing_extensions`` is not found
    while msgspec's ``_utils`` runs its first lines (before it defines ``get_type_hints``); once
    it has, the finder leaves ``sys.meta_path``."""

    @classmethod
    def find_spec(
        cls, name: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        utils = sys.modules.get("msgspec._utils")
        if utils is None:
            return None
        if not hasattr(utils, "get_type_hints"):
            if name == "typing_extensions":
                raise ModuleNotFoundError(f"No module named {name!r} for msgspec", name=name)
            return None
        if cls in sys.meta_path:
            sys.meta_path.remove(cls)
        return None


if "msgspec" not in sys.modules and "typing_extensions" not in sys.modules:
    sys.meta_path.insert(0, _TypingExtensionsNotForMsgspec)
