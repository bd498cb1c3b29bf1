"""``console.fit_table`` sizes a table from its cells' text and the overhead rich measures on the
header row alone: that sum must be rich's own natural width of the whole table, for every table
style the commands use, else a table that fits would be squeezed (or one that does not, printed
wide)."""

from __future__ import annotations

import io

from hypothesis import given, settings
from hypothesis import strategies as st
from rich import box
from rich.console import Console
from rich.measure import Measurement

from rooflinecli.console import _build, _cell_width, _overhead, fit_table

STYLES = [{}, {"box": box.SIMPLE_HEAD, "pad_edge": False}, {"show_edge": False, "pad_edge": False},
          {"box": None}, {"padding": (0, 2)}, {"collapse_padding": True}]
CELL = st.text(alphabet="ab 1.,x%-|µ→", min_size=0, max_size=14)


@settings(max_examples=150, deadline=None)
@given(
    st.integers(1, 6).flatmap(lambda n: st.tuples(
        st.lists(CELL, min_size=n, max_size=n),
        st.lists(st.lists(CELL, min_size=n, max_size=n), min_size=0, max_size=5),
    )),
    st.sampled_from(STYLES),
)
def test_natural_width_from_cells_is_richs_own(table, style):
    columns, rows = table
    con = Console(file=io.StringIO(), width=80)
    t = _build(None, columns, rows, [None] * len(rows), None, ["left"] * len(columns), style)
    ours = _overhead(con, t) + sum(max([_cell_width(c) for c in col] + [_cell_width(h)])
                                   for h, col in zip(columns, zip(*rows) if rows else [()] * len(columns)))
    assert ours == Measurement.get(con, con.options.update_width(1 << 20), t).maximum


def test_a_table_that_fits_prints_whole_and_one_that_does_not_leaves_its_optional_column_out():
    cols = ["name", "time ms", "notes"]
    rows = [["llama-3-8b", "1.25", "x" * 30], ["mixtral-8x7b", "12.5", "y" * 30]]
    wide = Console(file=io.StringIO(), width=120)
    wide.print(fit_table(wide, "t", cols, rows, optional=("notes",)))
    assert "x" * 30 in wide.file.getvalue() and "left out" not in wide.file.getvalue()
    narrow = Console(file=io.StringIO(), width=40)
    narrow.print(fit_table(narrow, "t", cols, rows, optional=("notes",)))
    out = narrow.file.getvalue()
    assert "left out at 40 columns: notes" in " ".join(out.split()) and "x" * 30 not in out and "12.5" in out
