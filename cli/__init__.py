"""The `zklock` command line (installed as zklock.cli)."""
