"""Rendering pages in headless Chromium, under the crawl's own rules (docs/RENDERING.md)."""
