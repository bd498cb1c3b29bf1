"""Bulk work on big files: Python's cyclic garbage collector paused while a reader or writer
builds millions of acyclic objects (parsed JSON, result rows, their checks). Left running, the
collector walks the growing heap again and again: a quarter of reading a 100,000-row results file
(4.4 s with it, 3.4 s without). The objects built hold no reference cycles, so nothing is left
for the collector to find when it resumes."""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

F = TypeVar("F", bound=Callable)


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic collector off for the block (nested blocks keep it off until the outermost ends)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def bulk(fn: F) -> F:
    """``fn`` run with the cyclic collector paused (``gc_paused``)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with gc_paused():
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]
