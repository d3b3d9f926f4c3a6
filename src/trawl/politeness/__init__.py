"""Politeness: the host scheduler (per-host and per-address slots), robots.txt, and
the operator's rules for hosts."""
