"""Operating a crawl: the REST API and dashboard, the crawls it manages, metrics, log
lines, progress, the summary and ``trawl export``."""
