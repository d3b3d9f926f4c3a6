"""Freshness: when a fetched page is due again, and sitemaps."""
