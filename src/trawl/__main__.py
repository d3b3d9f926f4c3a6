"""``python -m trawl`` runs the command line."""

from trawl.cli.launch import main

main()
