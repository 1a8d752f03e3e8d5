// Calls into a lock client in this application's Python (zklock/spark/lock_client.py), made
// from a JVM thread that keeps its connection to Python.
//
// py4j's ClientServer (PySpark's default, pinned threads) carries each JVM thread's calls into
// Python over a connection of that thread's own: a thread's first call opens a socket, and
// py4j's Python starts a thread to serve it (py4j.PythonClient.getConnection). A thread that
// runs a call from Python (a classic session's statement) has its connection already, served
// by the Python thread that waits for its answer. Spark Connect runs every operation on a new
// thread: each statement opened a socket and started a Python thread, on its critical path,
// and both outlived it until py4j's cleaner closed the idle connection (measured on zklock's
// Connect server: 60 INSERTs, 60 more Python threads). A call from a thread without its own
// connection is handed to one of the caller threads here instead, which keep theirs.
package zklock.engine;

import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.SynchronousQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;

import org.apache.spark.sql.SparkSession;

import py4j.Py4JPythonClientPerThread;

import zklock.EngineRefusal;

final class PythonCalls {
    /** How long a caller thread beyond the first waits for work before it ends: one per
     *  statement waiting on its lock client at once, kept while statements keep coming. */
    private static final long IDLE_SECONDS = 120;
    private static final AtomicInteger NAMED = new AtomicInteger();
    /** The caller threads: one always, more while more calls are in flight at once (a call
     *  may wait for its locks as long as the lock client's timeout says). */
    private static final ThreadPoolExecutor CALLERS = new ThreadPoolExecutor(
        1, Integer.MAX_VALUE, IDLE_SECONDS, TimeUnit.SECONDS, new SynchronousQueue<>(),
        work -> daemon(work, "zklock-python-caller-" + NAMED.incrementAndGet()));

    /** A daemon thread of zklock's engine running {@code work}. Made on a statement's
     *  thread, it inherits that thread's Spark state: what would keep a Spark Connect session
     *  and its class loader for the thread's life is dropped. */
    static Thread daemon(Runnable work, String name) {
        Thread thread = new Thread(() -> {
            SparkSession.clearActiveSession();
            work.run();
        }, name);
        thread.setContextClassLoader(PythonCalls.class.getClassLoader());
        thread.setDaemon(true);
        return thread;
    }

    /** py4j's connections to Python, one per thread; null where py4j shares a pool of
     *  connections among threads (PYSPARK_PIN_THREAD=false), and any thread may call. */
    private final Py4JPythonClientPerThread connections;

    /** Calls through {@code callbackClient}, py4j's client of the Python that serves the lock
     *  client (its gateway server's getCallbackClient); null: call on the calling thread. */
    PythonCalls(Object callbackClient) {
        this.connections = callbackClient instanceof Py4JPythonClientPerThread
            ? (Py4JPythonClientPerThread) callbackClient : null;
    }

    /** {@code call}'s answer: made on this thread when it has its connection to Python, else
     *  on a caller thread, waited for whatever interrupts this one (as a read from py4j's
     *  socket is: a grant abandoned half-way would be held by no statement). */
    <T> T call(Supplier<T> call) {
        if (connections == null || connections.getPerThreadConnection() != null) {
            return call.get();
        }
        Future<T> answer = CALLERS.submit(call::get);
        boolean interrupted = false;
        try {
            while (true) {
                try {
                    return answer.get();
                } catch (InterruptedException e) {
                    interrupted = true;
                } catch (ExecutionException e) {
                    throw EngineRefusal.<RuntimeException>sneaky(e.getCause());  // py4j's, as is
                }
            }
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }
}
