"""trawl: a polite, crash-safe, memory-frugal web crawler.

The library's names load on first use (PEP 562): ``import trawl`` loads no other module,
as the command line's launcher needs (trawl.cli.launch). They are :class:`Crawler`
(trawl.handlers.crawler), :class:`Page` (trawl.handlers.page), :class:`Follow`
(trawl.handlers.follow), :class:`Summary` (trawl.ops.summary) and :class:`CrawlConfig`
(trawl.config).
"""

TYPE_CHECKING = False
if TYPE_CHECKING:
    from trawl.config import CrawlConfig
    from trawl.handlers.crawler import Crawler
    from trawl.handlers.follow import Follow
    from trawl.handlers.page import Page
    from trawl.ops.summary import Summary

__version__ = "0.1.0"
__all__ = ["CrawlConfig", "Crawler", "Follow", "Page", "Summary", "__version__"]

_HOMES = {
    "Crawler": "trawl.handlers.crawler",
    "Page": "trawl.handlers.page",
    "Follow": "trawl.handlers.follow",
    "Summary": "trawl.ops.summary",
    "CrawlConfig": "trawl.config",
}
"""Where each name of the library lives."""


def __getattr__(name: str) -> object:
    """A library name, loaded from its module on first use."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'trawl' has no attribute {name!r}")
    import importlib

    value: object = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
