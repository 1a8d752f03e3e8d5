"""The lock protocol: lock objects and modes, requests, lock nodes and intents, the
all-or-none manager, the held sets and the session that owns them, fencing.
"""
