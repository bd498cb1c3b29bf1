"""The subset of YAML that measured-data folders use for their metadata (``collection_meta.yaml``,
``reuse.yaml``): nested block mappings, block lists of mappings or scalars, plain or quoted scalars,
``#`` comments. Enough to read them without a YAML package; anything else is a ``ValueError`` that
the caller turns into one line naming the file. The comments are returned too: a folder may say
in a comment that its table was carried forward from another one.
"""

from __future__ import annotations


def _scalar(text: str):
    text = text.strip()
    if not text:
        return None
    if text[0] in "'\"":
        q = text[0]
        end = text.rfind(q)
        if end <= 0:
            raise ValueError(f"unterminated quoted scalar {text[:40]!r}")
        return text[1:end].replace("''", "'") if q == "'" else text[1:end]
    if " #" in text:
        text = text.split(" #", 1)[0].rstrip()
    low = text.lower()
    if low in ("null", "~"):
        return None
    if low in ("true", "false"):
        return low == "true"
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def _lines(text: str) -> tuple[list[tuple[int, str]], list[str]]:
    out, comments = [], []
    for raw in text.splitlines():
        stripped = raw.strip()
        if not stripped or stripped == "---":
            continue
        if stripped.startswith("#"):
            comments.append(stripped.lstrip("#").strip())
            continue
        if "\t" in raw[: len(raw) - len(raw.lstrip())]:
            raise ValueError("tab in indentation")
        out.append((len(raw) - len(raw.lstrip(" ")), stripped))
    return out, comments


def _split_key(line: str) -> tuple[str, str]:
    if line[0] in "'\"":
        end = line.find(line[0], 1)
        key, rest = line[1:end], line[end + 1 :]
        if not rest.startswith(":"):
            raise ValueError(f"expected ':' after key in {line[:40]!r}")
        return key, rest[1:]
    if ":" not in line:
        raise ValueError(f"expected 'key: value', got {line[:40]!r}")
    key, rest = line.split(":", 1)
    if rest and not rest.startswith(" "):
        raise ValueError(f"expected 'key: value', got {line[:40]!r}")
    return key.strip(), rest


def _block(lines: list[tuple[int, str]], i: int, indent: int):
    """(value, next index) of the block starting at line i, whose lines have ``indent``."""
    if lines[i][1].startswith("- ") or lines[i][1] == "-":
        items = []
        while i < len(lines) and lines[i][0] == indent and (lines[i][1].startswith("- ") or lines[i][1] == "-"):
            body = lines[i][1][1:].strip()
            if not body:
                value, i = _block(lines, i + 1, lines[i + 1][0]) if i + 1 < len(lines) and lines[i + 1][0] > indent else (None, i + 1)
                items.append(value)
                continue
            if ":" in body and not body.startswith(("'", '"')) or (body[:1] in "'\"" and ":" in body):
                try:
                    _split_key(body)
                    is_map = True
                except ValueError:
                    is_map = False
                if is_map:  # "- key: value" opens a mapping indented by 2 more
                    sub = [(indent + 2, body)] + [ln for ln in lines[i + 1 :]]
                    value, j = _block(sub, 0, indent + 2)
                    items.append(value)
                    i = i + j
                    continue
            items.append(_scalar(body))
            i += 1
        return items, i
    out: dict = {}
    while i < len(lines) and lines[i][0] == indent:
        key, rest = _split_key(lines[i][1])
        if key in out:
            raise ValueError(f"key '{key}' given twice")
        if rest.strip()[:1] in (">", "|") and rest.strip().rstrip("+-") in (">", "|"):  # folded / literal block
            j = i + 1
            body = []
            while j < len(lines) and lines[j][0] > indent:
                body.append(lines[j][1])
                j += 1
            out[key] = (" " if rest.strip()[0] == ">" else "\n").join(body)
            i = j
        elif rest.strip() and not rest.strip().startswith("#"):
            out[key] = _scalar(rest)
            i += 1
        elif i + 1 < len(lines) and lines[i + 1][0] > indent:
            out[key], i = _block(lines, i + 1, lines[i + 1][0])
        elif i + 1 < len(lines) and lines[i + 1][0] == indent and lines[i + 1][1].startswith("- "):
            out[key], i = _block(lines, i + 1, indent)
        else:
            out[key] = None
            i += 1
    if i < len(lines) and lines[i][0] > indent:
        raise ValueError(f"unexpected indentation at {lines[i][1][:40]!r}")
    return out, i


def load(text: str) -> tuple[dict, list[str]]:
    """(the document as a dict, its comment lines). ``ValueError`` on anything outside the subset."""
    lines, comments = _lines(text)
    if not lines:
        return {}, comments
    value, i = _block(lines, 0, lines[0][0])
    if i != len(lines):
        raise ValueError(f"unexpected line {lines[i][1][:40]!r}")
    if not isinstance(value, dict):
        raise ValueError("the document is not a mapping")
    return value, comments
