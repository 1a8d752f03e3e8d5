package zklock.commit;

/**
 * How far a locked statement's writes got, for the message of one that failed: did any of
 * its jobs start to commit, and did every commit that started finish? Kept per thread: Spark
 * runs a write's job commit on the driver thread that runs the command (as CommitFence
 * relies on too). The engine's guard starts a statement's count; zklock's committers tell
 * it of their job set-ups and commits. A job whose committer is not zklock's is not
 * counted, and then the message says that zklock cannot tell.
 */
public final class WriteOutcome {
    private static final ThreadLocal<int[]> COUNTS = new ThreadLocal<>();
    private static final int JOBS = 0;   // file write jobs set up (StagedCommitProtocol)
    private static final int OURS = 1;   // ... of them with zklock's committer
    private static final int BEGUN = 2;  // job commits begun (zklock's committers)
    private static final int DONE = 3;   // ... and finished

    private WriteOutcome() {
    }

    /** A locked statement starts on this thread. */
    public static void begin() {
        COUNTS.set(new int[4]);
    }

    public static void jobSetUp() {
        count(JOBS);
    }

    public static void committerSetUp() {
        count(OURS);
    }

    public static void commitBegun() {
        count(BEGUN);
    }

    public static void commitDone() {
        count(DONE);
    }

    private static void count(int which) {
        int[] counts = COUNTS.get();
        if (counts != null) {
            counts[which]++;
        }
    }

    /** The counts of the statement that ran on this thread, which it then forgets. */
    public static Summary end() {
        int[] counts = COUNTS.get();
        COUNTS.remove();
        return new Summary(counts);
    }

    /** How far a finished statement's writes got. */
    public static final class Summary {
        private final int[] counts;

        private Summary(int[] counts) {
            this.counts = counts;
        }

        /** Did every write job of it commit, each through zklock's fence (its locks checked
         *  in ZooKeeper as the last thing before its files became visible)? */
        public boolean committedThroughFence() {
            return counts != null && counts[JOBS] > 0 && counts[OURS] == counts[JOBS]
                && counts[DONE] == counts[JOBS];
        }

        /** What became of its writes, as the end of a sentence ("... failed: <this>"). */
        public String describe() {
            if (counts == null) {
                return "zklock cannot tell how much of it was written";
            }
            if (counts[JOBS] == 0) {
                return "it failed before any file write job of it started";
            }
            if (counts[OURS] < counts[JOBS]) {
                return "zklock's committers did not run its job (spark.zklock.isolateCommits is"
                    + " off, or the application names another committer), so zklock cannot tell"
                    + " how much of it is in the table";
            }
            if (counts[BEGUN] == 0) {
                return "no write job of it committed: nothing it wrote is in the table";
            }
            if (counts[DONE] < counts[BEGUN]) {
                return "its job commit failed part-way: the table may hold part of what it"
                    + " wrote";
            }
            return "its write jobs committed, then it failed: the table may hold what it wrote";
        }
    }
}
