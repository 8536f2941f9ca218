"""Whether a user's function can take the arguments xlabind will pass it,
checked when a bound function is called (at trace time), so that a wrong
number of arguments is an error naming the bound function and the signature,
not a bare ``<lambda>() takes 1 positional argument`` from inside a callback."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any


def check_takes(
    owner: str,
    role: str,
    fn: Callable[..., Any],
    num_args: int,
    keywords: Iterable[str],
    added: Iterable[str] = (),
) -> None:
    """Raises a TypeError unless ``fn(*num_args arrays, **keywords, **added)``
    binds to its signature (`added`: the keywords xlabind passes itself);
    says nothing where the signature cannot be read (builtins, NumPy ufuncs)."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    keywords, added = tuple(keywords), tuple(added)
    try:
        signature.bind(*range(num_args), **dict.fromkeys(keywords + added))
    except TypeError as error:
        name = getattr(fn, "__name__", None) or type(fn).__name__
        given = f"{num_args} positional argument{'s' if num_args != 1 else ''}"
        if keywords:
            given += " and keyword arguments " + ", ".join(keywords)
        adds = f" (with {', '.join(added)}, which xlabind passes)" if added else ""
        raise TypeError(
            f"{owner}: called with {given}, but its {role} {name}{signature} "
            f"cannot take them{adds}: {error}"
        ) from None


def callable_functions(functions: Any) -> list[Callable[..., Any]]:
    """The Python functions among an implementation's (none for native targets)."""
    return [
        f
        for f in getattr(functions, "values", lambda: ())()
        if callable(f) and getattr(f, "xlabind_convention", None) is None
    ]
