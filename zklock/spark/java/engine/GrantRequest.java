// A statement's request for its locks, asked of its lock client until granted as the
// catalog is now: a command granted only after a wait, or planned on what existed, is planned
// again, and asked again for both plans where the first's locks do not cover the second.
package zklock.engine;

import java.util.Collections;
import java.util.Optional;
import java.util.UUID;
import java.util.function.Supplier;

import com.fasterxml.jackson.databind.JsonNode;

import org.apache.spark.SparkContext;
import org.apache.spark.sql.SparkSession;

import zklock.EngineRefusal;
import zklock.Protocol;
import zklock.Protocol.Field;
import zklock.commit.WriteOutcome;
import zklock.planner.LockAnswer;

final class GrantRequest {
    /** How often a command granted after waiting is planned again before giving up. */
    static final int REPLANS = 5;

    private final SparkSession session;
    private final EngineLockClient client;
    /** Its session's own locks it runs under too; null for none. */
    private final SessionLocks.Held own;
    private final String name;
    private final String what;
    private final String statement;
    /** Its first request, where it was sent ahead of the statement (GrantAhead). */
    private final GrantAhead ahead;

    GrantRequest(SparkSession session, EngineLockClient client, SessionLocks.Held own,
                 String name, String what, String statement, GrantAhead ahead) {
        this.session = session;
        this.client = client;
        this.own = own;
        this.name = name;
        this.what = what;
        this.statement = statement;
        this.ahead = ahead;
    }

    /** The guard holding {@code answer}'s locks. Granted only after waiting, or planned
     *  on what existed (CREATE ... IF NOT EXISTS of an existing object, in S), a command
     *  ({@code replan}) is planned again: Spark runs it as it analyzed it, so the locks
     *  must cover that plan and the catalog as it is now; when they do not, ask again
     *  for both. */
    EngineGuard grant(JsonNode answer, Supplier<JsonNode> replan) {
        GrantFigures before = null;
        for (int i = 0; i < REPLANS; i++) {
            EngineGuard guard = take(answer);
            if (guard == EngineGuard.COVERED) {
                return guard;
            }
            boolean waited = guard.figures().attempts() > 1;
            if (own != null) {  // fenced on the session's nodes too
                guard.alsoUnder(own);
            }
            if (before != null) {
                guard.figures().after(before);
            }
            if (replan == null || (!waited && !answer.path(Field.RECHECK).asBoolean(false))) {
                return guard;
            }
            JsonNode fresh = own == null ? replan.get() : own.remainder(replan.get(), name);
            if (LockAnswer.covers(answer, fresh)) {
                return guard;
            }
            before = guard.figures();
            guard.exit(name, null);
            answer = LockAnswer.union(answer, fresh);
        }
        throw EngineRefusal.raise(EngineRefusal.of(Protocol.Outcome.DENIED, "zklock: the"
            + " catalog kept changing the locks " + name + " on " + what + " needs ("
            + REPLANS + " plans)", null));
    }

    /** Ask the lock client for {@code answer}'s locks, all or none: the guard holding
     *  them, or COVERED where its LockingSession turned locking off (as Hive's
     *  hive.support.concurrency=false does); else its refusal, raised. */
    private EngineGuard take(JsonNode answer) {
        Optional<GrantAhead.Asked> claimed = ahead.claim(client, answer);
        GrantAhead.Asked asked = claimed.orElseGet(() -> askNow(answer));
        JsonNode grant = asked.grant;
        String outcome = grant.path(Field.OUTCOME).asText();
        if (Protocol.Outcome.UNLOCKED.equals(outcome)) {
            return EngineGuard.COVERED;
        }
        if (!Protocol.Outcome.GRANTED.equals(outcome)) {
            throw EngineRefusal.raise(EngineRefusal.of(outcome, grant.path(Field.MESSAGE)
                .asText("zklock: " + name + " on " + what + ": the lock client refused it"),
                null));
        }
        EngineGuard guard;
        try {
            guard = granted(asked, answer);
        } catch (RuntimeException e) {  // held by no statement: released
            client.release(asked.handle, true);
            throw e;
        }
        if (claimed.isPresent()) {
            guard.askedAhead();
        }
        return guard;
    }

    /** {@code answer}'s locks asked for now, waited for on this thread until they come or
     *  it is interrupted, or its query stops (GrantAhead.now). */
    private GrantAhead.Asked askNow(JsonNode answer) {
        String handle = UUID.randomUUID().toString();
        String request = LockRequests.acquire(session, client, handle, answer, name, what,
            statement);
        return ahead.now(client, answer, handle, request);
    }

    /** {@code client}'s answer to {@code request}; where the call failed (the grant may
     *  have happened), the set released, if any, and the failure raised. */
    static JsonNode ask(EngineLockClient client, String handle, String request) {
        try {
            return Documents.lockAnswer(client.acquire(request));
        } catch (RuntimeException e) {
            if (EngineFailures.callbackGone(e)) {
                LockClients.gone(client, Collections.emptyList());
                throw EngineRefusal.raise(EngineRefusal.of(Protocol.Outcome.UNAVAILABLE,
                    "zklock: the lock client in this application's Python did not answer ("
                    + e.getMessage() + "); the statement did not run", e));
            }
            try {
                client.release(handle, true);
            } catch (RuntimeException releaseFailed) {
                e.addSuppressed(releaseFailed);
            }
            throw e;
        }
    }

    /** The guard of a grant: this thread's jobs tagged with its set (cancelled when it
     *  is lost), and its nodes seen by nested executions and committers. */
    private EngineGuard granted(GrantAhead.Asked asked, JsonNode answer) {
        SparkContext sc = session.sparkContext();
        JsonNode grant = asked.grant;
        String jobTag = grant.path(Field.QUERY_ID).asText();
        EngineGuard guard = new EngineGuard(client, asked.handle, jobTag, sc, asked.nodes(),
            grant.path(Field.ZOOKEEPER).asText(), grant.path(Field.TOKEN).asText(), answer);
        sc.addJobTag(jobTag);
        EnclosingLocks.enter(sc, guard);
        WriteOutcome.begin();
        guard.figures().granted(asked.sent, asked.answered,
            grant.path(Field.ATTEMPTS).asInt(1),
            grant.path(Field.WAITED_FOR).asText(""));
        guard.soleIn(FreshListings.versions(grant.path(Field.SOLE), guard.zookeeper()));
        return guard;
    }
}
