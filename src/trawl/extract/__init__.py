"""The extract stage: HTML parsing, link candidates, URL normalisation, scope,
soft-404 detection, and the worker pool they run in."""
