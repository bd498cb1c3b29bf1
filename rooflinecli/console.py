"""The one way commands make a rich console, and the one table helper every command's tables use.

Width: ``COLUMNS`` when it holds a usable width (20 or more); a ``COLUMNS`` that does not
(``COLUMNS=0``, empty, not a number) falls back to 80. Without ``COLUMNS``, a terminal's own width,
and 200 columns for output that is not a terminal (CI logs, pipes, files, tests), so tables are
not folded into rich's 80-column default there.

Tables (``fit_table``) fit the width without cutting a number: headers wrap at their spaces, a
cell is never wrapped, folded or cut with an ellipsis. A table that cannot fit leaves out the
columns its command marks as optional (said in its caption), and one that still cannot fit is
printed stacked: one block per row, each value beside its column's name. Before leaving a column
out, a table that does not fit tries the compact style (a rule under the header, no borders).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence

#: width of tables written to a pipe or file when COLUMNS is unset
PIPE_WIDTH = 200
#: the width used when COLUMNS is set but not a usable width (0, empty, "abc", 5)
FALLBACK_WIDTH = 80
#: the narrowest COLUMNS taken as given
MIN_WIDTH = 20
#: per-row tables (regress, validate) show at most this many rows unless --max-rows says otherwise:
#: a full suite is a few hundred rows, and a terminal table of 100,000 rows takes minutes to print
TABLE_MAX_ROWS = 200
#: a wrapped text column (``fit_table(wrap=...)``) is at least this wide; a longer word folds
WRAP_MIN_WIDTH = 20


def columns_from_env() -> int | None:
    """The width ``COLUMNS`` asks for: None when unset; FALLBACK_WIDTH when it is not a usable
    width (``COLUMNS=0`` printed nothing before)."""
    raw = os.environ.get("COLUMNS")
    if raw is None:
        return None
    try:
        width = int(raw.strip())
    except ValueError:
        return FALLBACK_WIDTH
    return width if MIN_WIDTH <= width <= 100_000 else FALLBACK_WIDTH


def make_console(*, stderr: bool = False, **kwargs):
    """A ``rich.console.Console`` (imported here: rich costs start-up time only when used).

    Markup is off unless the caller asks (``markup=True``): names are data, never markup, so a
    model id such as ``x[/]`` prints as itself. A caller that styles with markup escapes every
    user-supplied string with ``rooflinecli.errors.markup_safe``.
    """
    from rich.console import Console

    kwargs.setdefault("highlight", False)
    kwargs.setdefault("markup", False)
    if "width" not in kwargs:
        width = columns_from_env()
        if width is not None:
            kwargs["width"] = width
    console = Console(stderr=stderr, **kwargs)
    if "width" not in kwargs and not console.is_terminal:
        console = Console(stderr=stderr, width=PIPE_WIDTH, **kwargs)
    return console


def _cell_width(text: str) -> int:
    from rich.cells import cell_len

    return max((cell_len(line) for line in str(text).splitlines()), default=0)


def _build(title, columns, rows, styles, caption, justify, table_kwargs):
    """A rich Table of plain text: cells, headers, title and caption are data, never markup."""
    from rich.table import Table
    from rich.text import Text

    t = Table(title=Text(title) if title else None, caption=Text(caption) if caption else None,
              title_justify="left", caption_justify="left", **table_kwargs)
    for i, name in enumerate(columns):
        t.add_column(Text(name), justify=justify[i], overflow="fold")
    for r, style in zip(rows, styles):
        t.add_row(*(Text(c) for c in r), style=style)
    return t


def _fit(console, table, columns, rows, wrap=()) -> bool:
    """Whether ``table`` fits the console's width, its cells whole and only its headers wrapped
    at spaces; when it does but not at its natural width, fix each column's width so that rich
    neither folds nor cuts a cell (its own shrinking does not keep to a column's widest cell)."""
    cells = [max((_cell_width(r[i]) for r in rows), default=0) for i in range(len(columns))]
    heads = [_cell_width(name) for name in columns]
    overhead = _overhead(console, table)  # padding and borders
    if overhead + sum(max(c, h) for c, h in zip(cells, heads)) <= console.width:  # its natural width
        return True
    # a text column of ``wrap`` is at least WRAP_MIN_WIDTH wide (its cells wrap at spaces; a longer word folds)
    whole = [min(WRAP_MIN_WIDTH, cells[i]) if columns[i] in wrap else cells[i] for i in range(len(columns))]
    words = [max((_cell_width(w) for w in name.split()), default=0) for name in columns]
    widths = [max(c, w, 1) for c, w in zip(whole, words)]
    slack = console.width - overhead - sum(widths)
    if slack < 0:
        return False
    for i in sorted(range(len(columns)), key=lambda i: heads[i] - widths[i]):  # fewest header lines first
        grow = min(slack, max(0, heads[i] - widths[i]))
        widths[i] += grow
        slack -= grow
    for i in (i for i in range(len(columns)) if columns[i] in wrap):  # what is left widens the wrapped text
        grow = min(slack, max(0, cells[i] - widths[i]))
        widths[i] += grow
        slack -= grow
    for column, w in zip(table.columns, widths):
        column.width = w
    return True


def _overhead(console, table) -> int:
    """Columns ``table`` takes beyond its widest cells (padding, borders): its header row's natural
    width less the headers' own, as rich measures it (the cells are never measured one by one; a
    cell of plain text is as wide as its longest line)."""
    from rich.measure import Measurement

    bare = copy.copy(table)
    bare.columns = [column.copy() for column in table.columns]  # a column's copy holds no cells
    bare.rows = []
    wide = console.options.update_width(1 << 20)
    return Measurement.get(console, wide, bare).maximum - sum(_cell_width(c.header) for c in table.columns)


def _stacked(console, title, columns, rows, caption):
    """One block per row: the row's first cell, then "column: value" pairs packed into lines."""
    from rich.console import Group
    from rich.text import Text

    width = console.width
    out = [Text(title, style="bold")] if title else []
    for r in rows:
        out.append(Text(f"  {r[0]}" if columns[0] == "" else f"  {columns[0]}: {r[0]}"))
        line = "   "
        for name, value in zip(columns[1:], r[1:]):
            pair = f"{name}: {value}" if name else str(value)
            if len(line) > 3 and len(line) + 3 + len(pair) > width:
                out.append(Text(line.rstrip()))
                line = "   "
            line += ("   " if len(line) > 3 else " ") + pair
        out.append(Text(line.rstrip()))
    if caption:
        out.append(Text(caption))
    return Group(*out)


def _compact() -> dict:
    """The table style of a narrow layout: a rule under the header, no outer padding."""
    from rich import box

    return {"box": box.SIMPLE_HEAD, "pad_edge": False}


def fit_table(
    console,
    title: str | None,
    columns: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    caption: str | None = None,
    optional: Sequence[str] = (),
    styles: Sequence[str | None] | None = None,
    justify: Sequence[str] | None = None,
    wrap: Sequence[str] = (),
    **table_kwargs,
):
    """A renderable of ``rows`` under ``columns`` that fits ``console``'s width (see the module).
    ``optional``: columns that may be left out, first named first; ``styles``: one rich style
    per row (or None); ``justify``: per column (default: the first left, the rest right);
    ``wrap``: text columns (names, never numbers) whose cells may wrap at spaces;
    ``table_kwargs``: rich ``Table`` options (box, pad_edge, ...)."""
    columns = list(columns)
    rows = [[str(c) for c in r] for r in rows]
    styles = list(styles) if styles is not None else [None] * len(rows)
    justify = list(justify) if justify is not None else ["left"] + ["right"] * (len(columns) - 1)
    keep = list(range(len(columns)))
    dropped: list[str] = []
    candidates = [columns.index(c) for c in optional if c in columns]
    while True:
        cols = [columns[i] for i in keep]
        cut = [[r[i] for i in keep] for r in rows]
        note = f"left out at {console.width} columns: {', '.join(dropped)} (a wider terminal or --json shows them)" if dropped else None
        cap = "; ".join(x for x in (caption, note) if x) or None
        for kwargs in (table_kwargs, {**table_kwargs, **_compact()}):  # as asked, then with thinner rules
            table = _build(title, cols, cut, styles, cap, [justify[i] for i in keep], kwargs)
            if _fit(console, table, cols, cut, wrap):
                return table
        if not candidates:
            return _stacked(console, title, columns, rows, caption)
        i = candidates.pop(0)
        keep.remove(i)
        dropped.append(columns[i] or "label")
