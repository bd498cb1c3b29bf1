#!/usr/bin/env bash
# The README's test command: the whole test suite, with what it needs from the system.
#
#   scripts/test.sh [pytest args...]        e.g. scripts/test.sh -x tests/hardware/test_hw_cli.py
#
# The tests run in parallel, one pytest-xdist worker per core (-n auto; PYTEST_WORKERS=N sets the
# count, PYTEST_WORKERS=0 runs them in one process), each test file on one worker (--dist loadfile:
# a module's fixtures, such as the built wheel or the headless browser, are made once).
#
# The report's browser test drives a real headless Chromium. When none is found (chromium,
# chromium-browser, google-chrome, or $ROOFLINE_CHROMIUM), this installs Debian's `chromium`
# package with apt-get (as root, or through sudo); where that is impossible it stops with one line
# saying what to install, rather than letting that test fail late. Runs the venv's Python: the
# active one, else ./.venv, else python3.
set -euo pipefail
cd "$(dirname "$0")/.."

have_chromium() {
    [ -n "${ROOFLINE_CHROMIUM:-}" ] && [ -x "${ROOFLINE_CHROMIUM}" ] && return 0
    for name in chromium chromium-browser google-chrome google-chrome-stable; do
        command -v "$name" >/dev/null 2>&1 && return 0
    done
    return 1
}

if ! have_chromium; then
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "error: the browser test needs a headless Chromium: install chromium (or set ROOFLINE_CHROMIUM to its path)" >&2
        exit 2
    fi
    if [ "$(id -u)" -eq 0 ]; then
        SUDO=""
    elif command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        echo "error: the browser test needs Chromium: run \`apt-get install chromium\` as root, then this again" >&2
        exit 2
    fi
    echo "installing chromium (apt-get) for the report's browser test" >&2
    $SUDO apt-get update -q
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q chromium
fi

if [ -n "${VIRTUAL_ENV:-}" ] && [ -x "$VIRTUAL_ENV/bin/python" ]; then
    PY="$VIRTUAL_ENV/bin/python"
elif [ -x .venv/bin/python ]; then
    PY=.venv/bin/python
else
    PY=python3
fi
if [ "${PYTEST_WORKERS:-auto}" != "0" ] && "$PY" -c "import xdist" 2>/dev/null; then
    exec "$PY" -m pytest -q -n "${PYTEST_WORKERS:-auto}" --dist loadfile "$@"
elif [ "${PYTEST_WORKERS:-auto}" != "0" ]; then
    echo "note: pytest-xdist is not installed (pip install -e '.[test]'): running the tests in one process" >&2
fi
exec "$PY" -m pytest -q "$@"
