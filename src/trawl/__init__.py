"""trawl: a polite, crash-safe, memory-frugal web crawler."""

__version__ = "0.1.0"
