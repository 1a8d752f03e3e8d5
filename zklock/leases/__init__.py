"""Leases: explicit, time-bound locks, their renewal and their reaping.
"""
