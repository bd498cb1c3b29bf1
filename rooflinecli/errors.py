"""User-facing errors: one line that names what is wrong and where; the CLI turns them into exit 2."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from pathlib import Path


class RooflineError(Exception):
    """An error in the user's input (spec file, model config, option, results file).

    Its message is a single line shown as ``error: <message>``; the CLI exits with code 2 and no
    traceback.
    """


def closest(name: str, valid: Iterable[str]) -> str | None:
    """The closest valid name to ``name`` (for "did you mean" hints), or None."""
    matches = difflib.get_close_matches(name, list(valid), n=1, cutoff=0.5)
    return matches[0] if matches else None


def unknown_name_error(what: str, name: str, valid: Iterable[str]) -> RooflineError:
    """``unknown GPU 'h10'; known: a100-sxm, h100-pcie, ...`` (with a suggestion when one is close)."""
    valid = sorted(valid)
    hint = closest(name, valid)
    tail = f" (did you mean '{hint}'?)" if hint else ""
    return RooflineError(f"unknown {what} '{name}'{tail}; known: {', '.join(valid)}")


def read_user_file(path: str | Path, what: str) -> str:
    """The UTF-8 text of a file the user named (a spec file, a model config): a missing file, a
    folder or an unreadable file is one RooflineError line naming the path and ``what`` it is."""
    path = Path(path)
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RooflineError(f"{path}: no such {what}") from None
    except IsADirectoryError:
        raise RooflineError(f"{path}: is a folder, not a {what}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise RooflineError(f"{path}: cannot read {what}: {e}") from None
