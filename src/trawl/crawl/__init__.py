"""The crawl loop: the engine that dispatches fetches and owns every task, the runner
that assembles a crawl from its configuration, and the commit stage."""
