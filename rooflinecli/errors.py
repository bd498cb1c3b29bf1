"""User-facing errors: one line that names what is wrong and where; the CLI turns them into exit 2.

Also the one reader of files a user names (``read_user_file``) and the text hygiene for anything a
user supplied that ends up on a terminal, in Markdown or in XML (``clean_text``, ``show_name``,
``markup_safe``): every renderer shows user strings through them.
"""

from __future__ import annotations

import difflib
import os
import re
import stat
from collections.abc import Iterable
from pathlib import Path


class RooflineError(Exception):
    """An error in the user's input (spec file, model config, option, results file).

    Its message is a single line shown as ``error: <message>``; the CLI exits with code 2 and no
    traceback.
    """


#: the largest file a user may name as input (spec, model config, results file): 256 MB. An endless
#: or huge file (``/dev/zero``, a log named by mistake) is refused rather than read into memory.
MAX_USER_FILE_BYTES = 256 * 1024 * 1024

#: C0/C1 control characters and ANSI escape sequences (CSI/OSC): never printed raw from user data
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
#: characters that reorder or hide text where they are shown: bidi embeddings, overrides, isolates
#: and marks, zero-width spaces and joiners, the word joiner and invisible operators, the BOM, the
#: soft hyphen, the combining grapheme joiner, the Mongolian vowel separator
_INVISIBLE = re.compile("[\u00ad\u034f\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff]")


def clean_text(text: object) -> str:
    """``text`` with terminal escape sequences, control characters (tabs and newlines kept) and
    bidi / zero-width characters removed: what every renderer (terminal, Markdown, JUnit) shows of
    a user-supplied string."""
    return _INVISIBLE.sub("", _CONTROL.sub("", _ANSI.sub("", str(text))))


def show_name(text: object) -> str:
    """A user-supplied name (op, shape, kernel) shown so that two names that look alike are told
    apart: ``clean_text``, followed, when the name holds anything but printable ASCII, by the code
    points of those characters (removed ones included): ``gemm`` and ``g\u0435mm`` show as ``gemm``
    and ``gеmm <U+0435>``; NFC and NFD ``café`` as ``café <U+00E9>`` and ``café <U+0301>``."""
    raw = str(text)
    shown = clean_text(raw)
    odd = [c for c in raw if not (" " <= c <= "~")]
    if not odd:
        return shown
    return f"{shown} <{' '.join(f'U+{ord(c):04X}' for c in odd)}>"


def has_control(text: str) -> bool:
    """Whether ``text`` holds a control character or escape sequence (refused in names)."""
    return bool(_CONTROL.search(text) or "\x1b" in text or "\t" in text or "\n" in text)


def one_line(text: object) -> str:
    """``text`` cleaned of control characters and folded onto one line."""
    return " ".join(clean_text(text).split())


def markup_safe(text: object) -> str:
    """A user-supplied string (model id, display name, op name) ready for a Rich console that
    parses markup: control characters removed, ``[`` escaped, so ``[/]`` prints as itself."""
    from rich.markup import escape

    return escape(clean_text(text))


def closest(name: str, valid: Iterable[str]) -> str | None:
    """The closest valid name to ``name`` (for "did you mean" hints), or None."""
    matches = difflib.get_close_matches(name, list(valid), n=1, cutoff=0.5)
    return matches[0] if matches else None


def unknown_name_error(what: str, name: str, valid: Iterable[str]) -> RooflineError:
    """``unknown GPU 'h10'; known: a100-sxm, h100-pcie, ...`` (with a suggestion when one is close)."""
    valid = sorted(valid)
    hint = closest(name, valid)
    tail = f" (did you mean '{hint}'?)" if hint else ""
    return RooflineError(f"unknown {what} '{one_line(name)}'{tail}; known: {', '.join(valid)}")


def _os_reason(e: OSError) -> str:
    return e.strerror or type(e).__name__


def check_user_file(path: str | Path, what: str, max_bytes: int = MAX_USER_FILE_BYTES) -> Path:
    """Refuse, before opening it, anything that is not a regular file of sane size: a missing
    path, a folder, a device (``/dev/zero``), a FIFO or socket (reading would block forever), a file
    over ``max_bytes``. Returns the path; every refusal is one RooflineError line."""
    path = Path(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise RooflineError(f"{path}: no such {what}") from None
    except NotADirectoryError:
        raise RooflineError(f"{path}: no such {what} (a parent is not a folder)") from None
    except (OSError, ValueError) as e:
        raise RooflineError(f"{path}: cannot read {what}: {_os_reason(e) if isinstance(e, OSError) else e}") from None
    if stat.S_ISDIR(st.st_mode):
        raise RooflineError(f"{path}: is a folder, not a {what}")
    if not stat.S_ISREG(st.st_mode):
        kind = "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode) else "a device"
        raise RooflineError(f"{path}: is {kind}, not a {what} (only regular files are read)")
    if st.st_size > max_bytes:
        raise RooflineError(f"{path}: {st.st_size:,} bytes is too large for a {what} (limit {max_bytes:,} bytes)")
    return path


def read_user_bytes(path: str | Path, what: str, max_bytes: int = MAX_USER_FILE_BYTES) -> bytes:
    """The bytes of a file the user named, checked by ``check_user_file``; a file that grows past
    the cap while being read is refused too."""
    path = check_user_file(path, what, max_bytes)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as e:
        raise RooflineError(f"{path}: cannot read {what}: {_os_reason(e)}") from None
    if len(data) > max_bytes:
        raise RooflineError(f"{path}: too large for a {what} (limit {max_bytes:,} bytes)")
    return data


def read_user_file(path: str | Path, what: str, max_bytes: int = MAX_USER_FILE_BYTES) -> str:
    """The UTF-8 text of a file the user named (a spec file, a model config, a results file): a
    missing file, a folder, a device, a FIFO, a file over the size cap, an unreadable or non-UTF-8
    file is one RooflineError line naming the path and ``what`` it is. Never blocks."""
    data = read_user_bytes(path, what, max_bytes)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise RooflineError(f"{path}: cannot read {what}: not UTF-8 text (byte {e.start})") from None


class DuplicateKeyError(ValueError):
    """A JSON object gives one key twice (``json`` would keep the last silently)."""


def json_object_once(pairs: list) -> dict:
    """``object_pairs_hook`` for ``json.loads``: the object, or DuplicateKeyError naming a key
    given twice."""
    out = dict(pairs)  # C speed; the walk below runs only for an object that lost a key
    if len(out) != len(pairs):
        import json

        seen: set = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKeyError(f"key {json.dumps(key)} appears twice in one object")
            seen.add(key)
    return out


def parse_json_text(text: str, where: str) -> object:
    """``json.loads`` for user files: bad JSON, NaN/Infinity literals, a key given twice in one
    object (JSON keeps the last silently) and nesting too deep to parse are one RooflineError line
    naming ``where``."""
    import json

    def _no_constants(name: str):
        raise ValueError(f"{name} is not a JSON number")

    try:
        return json.loads(text, parse_constant=_no_constants, object_pairs_hook=json_object_once)
    except DuplicateKeyError as e:
        raise RooflineError(f"{where}: {e}; give it once") from None
    except RecursionError:
        raise RooflineError(f"{where}: nested too deeply to parse") from None
    except ValueError as e:  # JSONDecodeError is a ValueError
        raise RooflineError(f"{where}: not valid JSON: {one_line(e)}") from None


def parse_toml_text(text: str, where: str) -> dict:
    """``tomllib.loads`` for user files; bad TOML and nesting too deep are one RooflineError line."""
    import tomllib

    try:
        return tomllib.loads(text)
    except RecursionError:
        raise RooflineError(f"{where}: nested too deeply to parse") from None
    except ValueError as e:  # TOMLDecodeError, and an integer of over 4,300 digits
        raise RooflineError(f"{where}: not valid TOML: {one_line(e)}") from None
