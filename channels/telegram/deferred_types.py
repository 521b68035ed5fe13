"""aiogram's Bot API types, built when first used instead of all at import.

aiogram declares its ~400 types with pydantic's ``defer_build``, then undoes it at the end of
``aiogram/types/__init__.py``: a loop calls ``model_rebuild`` on every type, which builds each
one's validator with a private copy of everything it can contain (a ``Message`` holds most of
the Bot API). That loop is ~100 MiB of the ~155 MiB ``import aiogram`` costs, and seconds of CPU.
Bruce reads and sends a handful of types.

``install()`` puts an import hook in front of ``aiogram.types`` (cheap: aiogram is not
imported by it). When aiogram is imported, its types skip that loop: the names the loop passed
as the namespace for their annotations (types only imported under ``TYPE_CHECKING``) are put
in each type's module instead, so pydantic resolves them itself when a type is first
validated. ``prebuild()`` then builds the types Bruce reads and sends, in the import thread,
so the first update costs nothing more and an annotation aiogram could not resolve is found
at start-up. Anything unexpected (an aiogram that no longer has the loop, or no
``TelegramObject``) leaves aiogram as it is: everything built at import, as before.

Checked against aiogram 3.31 (pyproject pins ``>=3.31,<3.32``; tests/channels/telegram/
test_deferred_types.py fails if a new minor changes what this depends on).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

__all__ = ["install", "installed", "prebuild", "deferred_count", "TYPES_USED", "METHODS_USED"]

_TYPES = "aiogram.types"
_BASE = "aiogram.types.base"
_METHODS_BASE = "aiogram.methods.base"

# what Bruce reads (updates) and what its calls return, and the calls it makes through aiogram
TYPES_USED = ("Update", "Message", "CallbackQuery", "User", "Chat", "MessageEntity", "File")
METHODS_USED = ("SendMessage", "EditMessageText", "SendChatAction", "AnswerCallbackQuery", "SendDocument",
                "SendMessageDraft")

_deferred: list[tuple[type[Any], dict[str, Any]]] = []
_state = {"deferred": 0}


def _defer_rebuild(cls: type[Any], /, **kwargs: Any) -> bool | None:
    """``TelegramObject.model_rebuild`` while ``aiogram.types`` runs: remember, build nothing."""
    namespace = kwargs.get("_types_namespace")
    if namespace is None or kwargs.get("force"):
        return _build(cls, **kwargs)
    _deferred.append((cls, dict(namespace)))
    return None


def _build(cls: type[Any], /, **kwargs: Any) -> bool | None:
    from pydantic import BaseModel

    depth = kwargs.pop("_parent_namespace_depth", 2) + 1  # this frame is one more between
    result: bool | None = BaseModel.model_rebuild.__func__(  # type: ignore[attr-defined]
        cls, _parent_namespace_depth=depth, **kwargs)
    return result


class _Loader(importlib.abc.Loader):
    """The module's own loader, with a step before (``aiogram.types``) or after (its ``base``)."""

    def __init__(self, name: str, inner: importlib.abc.Loader) -> None:
        self._name = name
        self._inner = inner

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        if self._name == _BASE:
            self._inner.exec_module(module)
            base = getattr(module, "TelegramObject", None)
            if base is not None and base.model_config.get("defer_build"):
                base.model_rebuild = classmethod(_defer_rebuild)
            return
        if self._name == _METHODS_BASE:
            self._inner.exec_module(module)
            method = getattr(module, "TelegramMethod", None)
            if method is not None:
                method.model_config["defer_build"] = True  # its subclasses (the Bot API's methods) inherit it
            return
        try:
            self._inner.exec_module(module)
        finally:
            _finish()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _finish() -> None:
    """``aiogram.types`` has run: take the override away and give each deferred type's module
    the names its annotations use."""
    base_module = sys.modules.get(_BASE)
    base = getattr(base_module, "TelegramObject", None)
    if base is not None and "model_rebuild" in vars(base):
        del base.model_rebuild
    for cls, namespace in _deferred:
        module = sys.modules.get(cls.__module__)
        if module is not None:
            for name, value in namespace.items():
                vars(module).setdefault(name, value)
    _state["deferred"] = len(_deferred)
    _deferred.clear()


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in (_TYPES, _BASE, _METHODS_BASE):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(fullname, spec.loader)
        return spec


def install() -> None:
    """Defer aiogram's types from now on; nothing when aiogram's types are already imported."""
    if _TYPES in sys.modules or installed():
        return
    sys.meta_path.insert(0, _Finder())


def installed() -> bool:
    return any(isinstance(finder, _Finder) for finder in sys.meta_path)


def deferred_count() -> int:
    """How many types the last import left to be built on first use (0: aiogram built them all)."""
    return _state["deferred"]


def prebuild(types: Sequence[str] = TYPES_USED, methods: Sequence[str] = METHODS_USED) -> None:
    """Build these types and methods now (each with what it contains). Raises pydantic's error
    when an annotation cannot be resolved: aiogram changed what ``install`` relies on."""
    for package, names in ((_TYPES, types), ("aiogram.methods", methods)):
        module = importlib.import_module(package)
        for name in names:
            cls = getattr(module, name)
            if not cls.__pydantic_complete__:
                cls.model_rebuild(raise_errors=True)
