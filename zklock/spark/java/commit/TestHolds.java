package zklock.commit;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.concurrent.TimeUnit;

/**
 * Test hooks that hold a statement at a point of its life, so that a test can lose its locks
 * exactly there: off unless the JVM system property named at that point names a file; then
 * the statement creates "file.held" and waits (at most two minutes) while the file exists.
 * Points: zklock.fence.holdFile (a job commit, before the fence's check: CommitFence) and
 * zklock.guard.holdFile (a command granted its locks, before it runs: LockedCommandExec).
 */
public final class TestHolds {
    private TestHolds() {
    }

    /** Wait at the point {@code property} while its file exists; false if interrupted. */
    public static boolean await(String property) {
        String file = System.getProperty(property);
        if (file == null) {
            return true;
        }
        Path hold = Paths.get(file);
        try {
            Files.write(Paths.get(file + ".held"), new byte[0]);
        } catch (IOException e) {
            return true;  // a test's directory gone: nothing holds
        }
        long deadline = System.nanoTime() + TimeUnit.MINUTES.toNanos(2);
        while (Files.exists(hold) && System.nanoTime() < deadline) {
            try {
                Thread.sleep(20);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return false;
            }
        }
        return true;
    }
}
