"""The process's entry: the ``roofline`` console script and ``python -m rooflinecli``.

Python's cyclic garbage collector is paused before anything is imported: start-up builds tens of
thousands of long-lived objects (modules, classes, the Typer app) and no garbage cycles, and the
collector would walk them some 70 times (about 10 ms of a 0.17 s ``analyze``).
``rooflinecli.cli.main`` keeps it paused for the quick analytical commands and turns it back on
for every other.
"""

import gc


def main() -> None:
    gc.disable()
    from rooflinecli.cli import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
