"""Fetching: the HTTP/1.1 client, one bounded GET, name resolution, the network guard
(SSRF defence) and the retry policy."""
