package zklock;

/**
 * How far a locked statement's writes got, for the message of one that failed: did any of
 * its jobs start to commit, and did every commit that started finish? Kept per thread: Spark
 * runs a write's job commit on the driver thread that runs the command (as CommitFence
 * relies on too). The engine's guard starts a statement's count; zklock's committers tell
 * it of their job set-ups and commits. A job whose committer is not zklock's is not
 * counted, and then the message says that zklock cannot tell.
 */
final class WriteOutcome {
    private static final ThreadLocal<int[]> COUNTS = new ThreadLocal<>();
    private static final int JOBS = 0;   // file write jobs set up (StagedCommitProtocol)
    private static final int OURS = 1;   // ... of them with zklock's committer
    private static final int BEGUN = 2;  // job commits begun (zklock's committers)
    private static final int DONE = 3;   // ... and finished

    private WriteOutcome() {
    }

    /** A locked statement starts on this thread. */
    static void begin() {
        COUNTS.set(new int[4]);
    }

    static void jobSetUp() {
        count(JOBS);
    }

    static void committerSetUp() {
        count(OURS);
    }

    static void commitBegun() {
        count(BEGUN);
    }

    static void commitDone() {
        count(DONE);
    }

    private static void count(int which) {
        int[] counts = COUNTS.get();
        if (counts != null) {
            counts[which]++;
        }
    }

    /** What became of the writes of the statement that ran on this thread, as the end of a
     *  sentence ("... failed: <this>"); then forgets it. */
    static String describe() {
        int[] counts = COUNTS.get();
        COUNTS.remove();
        if (counts == null) {
            return "zklock cannot tell how much of it was written";
        }
        if (counts[JOBS] == 0) {
            return "it failed before any file write job of it started";
        }
        if (counts[OURS] < counts[JOBS]) {
            return "a committer zklock does not know ran its job, so zklock cannot tell how much"
                + " of it is in the table";
        }
        if (counts[BEGUN] == 0) {
            return "no write job of it committed: nothing it wrote is in the table";
        }
        if (counts[DONE] < counts[BEGUN]) {
            return "its job commit failed part-way: the table may hold part of what it wrote";
        }
        return "its write jobs committed, then it failed: the table may hold what it wrote";
    }
}
