// The lock clients of this JVM, by SparkSession: which client takes a statement's locks. A
// LockingSession binds its own to the SparkSession it wraps; enforce() (or the first
// LockingSession) installs the process's; where neither runs, a child process is started
// (ChildSupervisor.java). Each py4j client comes with its profile (ClientProfile.java): where
// it locks, and its values of the settings the engine reads; it is called through its
// Python's py4j client (PythonCalls.java).
package zklock.engine;

import java.io.IOException;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.WeakHashMap;

import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.spark.sql.SparkSession;

import zklock.Protocol;
import zklock.Setting;

final class LockClients {
    /** The process's lock client installed through py4j (enforce(), a LockingSession). */
    private static volatile EngineLockClient client;
    /** The child process this JVM starts as its lock client where none is installed. */
    private static final ChildSupervisor CHILD = new ChildSupervisor();
    /** The lock clients of sessions a LockingSession wraps: each takes its session's locks
     *  with that LockingSession's manager and settings. */
    private static final Map<SparkSession, EngineLockClient> BOUND =
        Collections.synchronizedMap(new WeakHashMap<>());


    /** Make {@code next} the process's lock client (null: none), as {@code profile} says it
     *  is (ClientProfile.java; null for a client this returned before), called through
     *  {@code callbacks} (PythonCalls.java); returns the previous one. */
    static EngineLockClient install(EngineLockClient next, String profile, Object callbacks) {
        EngineLockClient previous;
        synchronized (LockClients.class) {
            previous = client;
            client = profiled(next, profile, callbacks);
        }
        if (previous != null) {  // its completed statements' releases, while its Python is here
            Releases.flush(previous);  // (outside the lock: a failed send calls gone())
        }
        return previous;
    }

    /** Make {@code next} the lock client of every statement {@code session} runs (null: the
     *  process's again), as {@code profile} says it is, called through {@code callbacks}.
     *  One per session: false, and nothing changed, when {@code session} has one already (a
     *  second LockingSession would silently take the first one's statements). */
    static boolean bind(SparkSession session, EngineLockClient next, String profile,
                        Object callbacks) {
        if (next == null) {
            EngineLockClient previous;
            synchronized (LockClients.class) {
                previous = BOUND.remove(session);
            }
            if (previous != null) {  // its completed statements' releases, before it closes
                Releases.flush(previous);  // (outside the lock: a failed send calls gone())
            }
            return true;
        }
        synchronized (LockClients.class) {
            return BOUND.putIfAbsent(session, profiled(next, profile, callbacks)) == null;
        }
    }

    private static EngineLockClient profiled(EngineLockClient next, String profile,
                                             Object callbacks) {
        return next == null || profile == null ? next
            : new Profiled(next, ClientProfile.read(profile), new PythonCalls(callbacks));
    }

    /** A py4j lock client with its profile, known while it lives: a dead one cannot be
     *  asked. Kept beside it, as a proxy's hashCode and equals would call into its Python.
     *  Every call goes through {@link PythonCalls}. */
    private static final class Profiled implements EngineLockClient {
        final EngineLockClient client;
        final ClientProfile profile;
        final PythonCalls calls;

        Profiled(EngineLockClient client, ClientProfile profile, PythonCalls calls) {
            this.client = client;
            this.profile = profile;
            this.calls = calls;
        }

        @Override
        public String acquire(String request) {
            return calls.call(() -> client.acquire(request));
        }

        @Override
        public String release(String handle, boolean failed) {
            return calls.call(() -> client.release(handle, failed));
        }

        @Override
        public String parse(String request) {
            return calls.call(() -> client.parse(request));
        }

        @Override
        public String cancel(String handle) {
            return calls.call(() -> client.cancel(handle));
        }
    }

    /** The policy for a command without a lock rule for {@code session}'s statements
     *  ({@link #setting}). */
    static String unknownStatements(SparkSession session) {
        return setting(session, Protocol.UNKNOWN_STATEMENTS);
    }

    /** The value of {@code setting}, one the engine reads (config.py's ENGINE_SETTINGS), for
     *  {@code session}'s statements: its conf's and its lock client's, by
     *  docs/configuration.md's precedence (ClientProfile.resolve), else the environment's,
     *  else the default (Setting.check). The child's profile is known once it has
     *  started: before, the conf decides. */
    static String setting(SparkSession session, Setting setting) {
        String conf = session.conf().get(setting.key, null);
        ClientProfile profile = profile(session);
        return setting.refusing(profile == null ? conf : profile.resolve(setting.key, conf));
    }

    /** Has a LockingSession bound a lock client to {@code session}? */
    static boolean bound(SparkSession session) {
        return BOUND.containsKey(session);
    }

    /** The profile of {@code session}'s lock client, without starting one; null when none
     *  is known. */
    private static ClientProfile profile(SparkSession session) {
        EngineLockClient bound = BOUND.get(session);
        EngineLockClient chosen = bound != null ? bound : client;
        if (chosen != null) {
            return chosen instanceof Profiled ? ((Profiled) chosen).profile : null;
        }
        return CHILD.profile();
    }

    /** Is a lock client installed in this process? */
    static boolean hasClient() {
        return client != null;
    }

    /** The lock client of {@code session}'s statements: the one bound to it, else the
     *  process's, else (unless spark.zklock.lockClient=none) a child process started now
     *  (ChildLockClient.java: a process that never imported zklock's Python, such as Spark's
     *  Thrift server); null when there is none. */
    static EngineLockClient client(SparkSession session) {
        EngineLockClient bound = BOUND.get(session);
        if (bound != null) {
            return bound;
        }
        EngineLockClient installed = client;
        if (installed != null || !ChildLockClient.wanted(session.sparkContext())) {
            return installed;
        }
        return CHILD.current(session.sparkContext());
    }

    /** {@code dead}, a py4j lock client, failed to answer (its Python's callback server is
     *  gone): it is no longer asked, so the next statement goes to the process's next lock
     *  client instead of failing on it forever. A child started after it must lock where
     *  it locked (ChildSupervisor.requireSpace): a child with other settings (the Spark
     *  conf's, where enforce() was given its own) would lock where no one else looks.
     *  {@code nodes}: the lock nodes of a statement it held, which the JVM now counts as
     *  lost, for the next child to delete rather than wait out the dead Python's session. */
    static synchronized void gone(EngineLockClient dead, List<String> nodes) {
        Releases.forget(dead);
        if (client == dead) {
            client = null;
        }
        BOUND.values().removeIf(c -> c == dead);
        String space = dead instanceof Profiled ? ((Profiled) dead).profile.space : null;
        CHILD.inherit(space, nodes);
        System.err.println("zklock: a lock client in this application's Python stopped"
            + " answering; the statements it held failed, and later statements go to the"
            + " next lock client" + (space == null ? "" : ", which must lock in " + space));
    }

    /** The child lock client's state (ChildSupervisor.status), as JSON. */
    static String childStatus() {
        try {
            return new ObjectMapper()
                .writeValueAsString(CHILD.status());
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }


    private LockClients() {
    }
}
