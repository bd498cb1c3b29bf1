"""The one way commands make a rich console.

On a terminal, rich uses the terminal's width. Output that is not a terminal (CI logs, pipes,
files, tests) gets 200 columns unless ``COLUMNS`` says otherwise, so tables are not folded into
rich's 80-column default.
"""

from __future__ import annotations

import os

#: width of tables written to a pipe or file when COLUMNS is unset
PIPE_WIDTH = 200


def make_console(*, stderr: bool = False, **kwargs):
    """A ``rich.console.Console`` (imported here: rich costs start-up time only when used).

    Markup is off unless the caller asks (``markup=True``): names are data, never markup, so a
    model id such as ``x[/]`` prints as itself. A caller that styles with markup escapes every
    user-supplied string with ``rooflinecli.errors.markup_safe``.
    """
    from rich.console import Console

    kwargs.setdefault("highlight", False)
    kwargs.setdefault("markup", False)
    console = Console(stderr=stderr, **kwargs)
    if "width" not in kwargs and not console.is_terminal and not os.environ.get("COLUMNS"):
        console = Console(stderr=stderr, width=PIPE_WIDTH, **kwargs)
    return console
