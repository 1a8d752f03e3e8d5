// The lock client that zklock's engine extension (EngineLocks.java) asks for the locks of a
// statement: the one a LockingSession bound to the statement's SparkSession, else the
// process's. zklock has one lock client, the Python one (zklock/spark/lock_client.py), which
// registers itself through py4j's callback server; the JVM never takes a lock itself, so the
// lock protocol has one implementation.
//
// Both directions are versioned JSON documents (docs/spark.md, "Enforcement in Spark's
// engine", lists them with their fields):
//   acquire({"version": 1, "handle": "<the JVM's id of this request>", "answer": <LockAnswer>,
//            "statement": "...", "user": "..."|null, "application": "<Spark application id>",
//            "command": "<plan node>", "objects": "<what it locks, for messages>",
//            "query_id": "<the thread's zklock.query.id>"|null,
//            "conf": {"<a carried key the session's conf sets>": "<its value>", ...}
//                    (how the statement waits: lock.timeout, lock.retries, ...; config.py's
//                     carried settings, counted at the Spark conf's level),
//            "releases": ["<handle>", ...]})  (completed statements' sets, released first:
//                                              Releases.java)
//     -> {"version": 1, "outcome": "granted", "handle": "...", "query_id": "...",
//         "token": "...", "attempts": n, "zookeeper": "...", "nodes": ["/warehouse/...", ...],
//         "sole": [[db, table, "<table node>", czxid, cversion], ...]}  (FreshListings.java)
//      | {"version": 1, "outcome": "unlocked"}   (support_concurrency is off)
//      | {"version": 1, "outcome": "denied" | "refused" | "unavailable", "message": "..."}
//   release("<handle>", failed) -> {"version": 1, "outcome": "released", "objects": [...]}
//                                | {"version": 1, "outcome": "lost", "message", "objects"}
//   cancel("<handle>") -> {"version": 1, "outcome": "cancelled"}  (its acquire, if it still
//                          waits, answers {"outcome": "cancelled", "message": "..."}, holding
//                          nothing: GrantAhead.java)
//   parse({"version": 1, "statement": "LOCK TABLE ..."})   (SessionLocks.java)
//     -> {"version": 1, "outcome": "parsed", "kind": "lock" | "unlock",
//         "table": "`db`.`t`" | null, "database": "db" | null, "partition": {"k": "v"},
//         "mode": "S" | "X" (lock)}
//      | {"version": 1, "outcome": "refused", "message": "..."}
// The handle is the JVM's, so that it can release what a grant it never read took. The
// words (calls, outcomes) are protocol.properties' (the generated Protocol, protocol.py).
package zklock.engine;

public interface EngineLockClient {
    /** Take the locks of a planned command, all or none (the client's retries included). */
    String acquire(String request);

    /** Release what {@link #acquire} granted for {@code handle} (nothing when it granted
     *  nothing); {@code failed}: the command failed. Says whether the set was lost meanwhile. */
    String release(String handle, boolean failed);

    /** A session's own statement (LOCK or UNLOCK TABLE), read by zklock's one parser. */
    String parse(String request);

    /** Give up {@link #acquire}'s request for {@code handle} if it still waits for a holder
     *  (its caller stopped): it answers cancelled, holding nothing. A request granted
     *  first answers its grant, the caller's to release; a cancel that comes before its
     *  request is kept for it. */
    String cancel(String handle);
}
