"""The ``trawl`` command's entry point, light enough to run before the rest of trawl loads.

Loading trawl's modules takes a good part of a second; a Ctrl-C (or a SIGTERM, which
trawl takes as one) in that time ends the process as one during a crawl does: exit 130
and one line on stderr, no traceback. The console script and ``python -m trawl`` both
start here. This module loads nothing at all before :func:`main` is ready to catch the
interruption (``sys`` is always loaded): not even ``typing`` or ``signal``; a signal
that comes while the rest loads takes effect once it has loaded.
"""

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import FrameType
    from typing import NoReturn

INTERRUPTED = "trawl: interrupted; run the same command to resume"
"""What trawl says when a signal stopped it (its state is committed)."""
INTERRUPTED_EXIT = 130


def _ignore_stop_signals() -> None:
    """From here on the process only exits: a signal must not interrupt that (a
    traceback) nor end it by SIGINT instead of its exit code."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def interrupted() -> "NoReturn":
    """Say that trawl was interrupted and how to resume; exit 130."""
    _ignore_stop_signals()
    sys.stderr.write(INTERRUPTED + "\n")
    sys.stderr.flush()
    sys.exit(INTERRUPTED_EXIT)


def _terminate(signum: int, frame: "FrameType | None") -> None:
    """SIGTERM acts as Ctrl-C does, wherever the process is."""
    import signal

    signal.raise_signal(signal.SIGINT)


def main() -> None:
    """Load the command line and run it; an interruption while it loads exits 130."""
    try:
        import signal

        # While trawl loads, a signal is noted, not raised: a KeyboardInterrupt raised
        # in code that a compiled module runs as it loads makes Python end the process
        # by SIGINT at exit, even once handled (seen: the exit status was -2, not 130).
        noted: list[int] = []
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda signum, frame: noted.append(signum))
        from trawl.cli.commands import main as run_cli

        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, _terminate)
        if noted:
            interrupted()
        run_cli()
    except KeyboardInterrupt:
        interrupted()
    finally:
        _ignore_stop_signals()
