"""The shared store: PostgreSQL, for crawls whose workers share one database.

``store`` holds the engine (``PostgresStore``); ``sql`` its statements, one named
constant each; ``commit`` the writes of a commit batch; ``content`` those of the content
tables; ``migrate`` the schema migrations; ``crawls`` the crawls a database keeps.
"""
