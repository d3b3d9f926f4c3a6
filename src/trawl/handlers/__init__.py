"""Page handlers: the functions a library user writes to take items and links from pages.

A handler receives a :class:`~trawl.handlers.page.Page` in an extract worker and yields
items (dicts, dataclass instances, pydantic models) and
:class:`~trawl.handlers.follow.Follow` requests. ``refs`` names a handler so a worker
process can load it, ``run`` runs one on a page, ``items`` turns items into JSON.
"""
