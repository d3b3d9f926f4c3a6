"""``python -m trawl`` runs the command line."""

from trawl.launch import main

main()
