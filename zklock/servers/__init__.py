"""The local servers zklock starts: an embedded ZooKeeper, a loopback ensemble to run
and to break, free ports, and the processes behind them.
"""
