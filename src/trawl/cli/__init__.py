"""The command line: the ``trawl`` entry point, its commands, ``--help`` pages, seed
checks and the end-of-run report."""
