"""A deterministic multi-host test web site with exact ground truth, served on loopback.

`generate_site` builds the site, `SiteServer` serves it on 127.0.0.1 with one port and
virtual hosts, and records every request so tests can check politeness at the server.
"""

from trawl.demo.generator import generate_site
from trawl.demo.server import RequestRecord, SiteServer, serve_forever
from trawl.demo.site import Response, Route, Site, canonical_target, canonical_url, route_key

__all__ = [
    "RequestRecord",
    "Response",
    "Route",
    "Site",
    "SiteServer",
    "canonical_target",
    "canonical_url",
    "generate_site",
    "route_key",
    "serve_forever",
]
