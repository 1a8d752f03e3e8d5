"""Scheduled SQL queries coordinated through ZooKeeper (installed as zklock.scheduler)."""
