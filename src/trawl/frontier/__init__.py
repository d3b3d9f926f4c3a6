"""The frontier: queued URLs in priority order, the seen-set in front of the store,
and the in-link counts that raise a popular URL's priority."""
