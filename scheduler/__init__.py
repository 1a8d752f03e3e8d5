"""Scheduled SQL queries coordinated through ZooKeeper (installed as zklock.scheduler).

Hive's scheduled queries: defined in SQL (CREATE/ALTER/DROP SCHEDULED
QUERY), stored as znodes, run exactly once per trigger time by whichever
scheduler process takes them, under an elected leader that keeps time and
house. The modules, one concept each:

- :mod:`.schedule`  cron and EVERY schedules, timezones, DST
- :mod:`.ddl`       the SQL grammar
- :mod:`.model`     ScheduledQuery, Execution, State
- :mod:`.store`     the znode layout and every ZooKeeper read and write
- :mod:`.admin`     create/alter/drop/run-now with the security rules
- :mod:`.election`  leadership, reported lost at once
- :mod:`.leader`    time-keeping (claims) and housekeeping (timeouts, trimming)
- :mod:`.executor`  taking, running, progress, fencing
- :mod:`.runner`    Spark: statements through a LockingSession, job groups
- :mod:`.service`   one scheduler process putting these together
- :mod:`.views`     rows of sysdb.scheduled_queries and sysdb.scheduled_executions
- :mod:`.sql`       what the scheduler adds to a LockingSession (registered on import)
"""
