"""``python -m trawl`` runs the command line."""

from trawl.cli import main

main()
