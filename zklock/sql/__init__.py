"""zklock's own SQL (SHOW LOCKS, LOCK TABLE, leases ...): its tokens and its parser.
"""
