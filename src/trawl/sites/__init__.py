"""Per-site settings: politeness, request headers, cookies, credentials, rendering,
proxies and budgets for one host or a family of hosts (docs/SITES.md)."""
