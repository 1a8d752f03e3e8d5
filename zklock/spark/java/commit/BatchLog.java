package zklock.commit;

import java.io.ByteArrayOutputStream;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.UUID;
import java.util.regex.Pattern;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.io.IOUtils;
import org.apache.hadoop.mapreduce.JobContext;
import org.apache.hadoop.mapreduce.lib.output.FileOutputCommitter;
import org.apache.spark.SparkContext;

import org.apache.spark.SparkContext$;

/**
 * Which batches of one writer (an application id: a streaming query's id, or a name a
 * foreachBatch writer gives) a table holds, so that a batch written again after a crash is
 * not written twice: Delta's {@code txnAppId}/{@code txnVersion}, kept beside the table's files
 * in {@code <table>/_zklock/batches/<app id>/}, which Spark and Hive readers never list (a
 * name starting with {@code _} is hidden to both).
 *
 * <p>Two records per batch, each one file: {@code <n>.pending}, written by the write's job
 * commit after its fence and before Hadoop moves a file (Staging.commitJob), naming the job's
 * output, its staging and the id its files are named by; {@code <n>.committed}, written once
 * the write returned (its partitions added to the catalog too). A batch found pending was cut
 * off while its files moved: what is still staged is moved the same way ({@link #finish}),
 * so the batch becomes whole, once; into a Hive-format table, whose files Hive's load moves,
 * the files it moved are removed instead and it is written again ({@link #undo}). Written
 * and read under the batch's X lock on the table, so no other writer of it runs meanwhile.
 */
public final class BatchLog {
    /** What the table holds of a batch. */
    public enum State {
        /** Nothing: write it. */
        NEW,
        /** Its commit began and may not have ended: finish it ({@link #finish}). */
        PENDING,
        /** All of it (or of a later batch of the same writer): skip it. */
        COMMITTED
    }

    /** The directory of a table's records, and where in it they are kept. */
    private static final String RECORDS = "_zklock";
    static final String DIR = RECORDS + "/batches";
    /** Local property: the records' directory and the batch whose write runs on this thread,
     *  tab-separated (Staging.commitJob records its commit there). */
    static final String RECORDING = "zklock.commit.batch";
    /** RECORDING's third field where the record names the id of the job's files. */
    private static final String UNDOABLE = "undoable";
    /** Job conf: the id Spark names the job's files by (StagedCommitProtocol), kept in a
     *  batch's pending record so that a batch whose files Hive's load moves can be undone. */
    public static final String FILES_NAMED_BY = "zklock.commit.filesNamedBy";
    /** An application id, as it is written in a path. */
    private static final Pattern APP_ID = Pattern.compile("[A-Za-z0-9][A-Za-z0-9._-]{0,127}");

    private static final String PENDING = ".pending";
    private static final String COMMITTED = ".committed";

    private final FileSystem fs;
    private final Path dir;
    private final Configuration conf;
    /** The records of earlier batches {@link #state} found. */
    private final List<Path> earlier = new ArrayList<>();
    /** The earlier batches {@link #state} found pending: cut off, and then skipped by their
     *  writer (a foreachBatch function that swallowed the failure), to be finished first. */
    private final List<Long> unfinished = new ArrayList<>();

    private BatchLog(Path dir, Configuration conf) throws IOException {
        this.fs = recordsOn(dir.getFileSystem(conf));
        this.dir = dir;
        this.conf = conf;
    }

    /** The file system the records are kept on: {@code fs}, or, for the local one, its raw
     *  file system (a record needs no checksum file beside it). */
    private static FileSystem recordsOn(FileSystem fs) {
        return fs instanceof LocalFileSystem
            ? ((LocalFileSystem) fs).getRawFileSystem() : fs;
    }

    /** The records of writer {@code appId} in the table at {@code location}; an
     *  IllegalArgumentException for an id that is not a plain name. */
    public static BatchLog of(Path location, String appId, Configuration conf)
            throws IOException {
        return new BatchLog(new Path(new Path(location, DIR), checked(appId)), conf);
    }

    /** {@code appId}, when it is a plain name that can be part of a path; else an
     *  IllegalArgumentException saying what one is. */
    public static String checked(String appId) {
        if (appId == null || !APP_ID.matcher(appId).matches()) {
            throw new IllegalArgumentException("zklock: a writer's id is 1 to 128 letters,"
                + " digits, '.', '_' or '-', starting with a letter or digit, not " + appId);
        }
        return appId;
    }

    /** What the table holds of batch {@code batch} (one listing of the records). */
    public State state(long batch) throws IOException {
        FileStatus[] records;
        try {
            records = fs.listStatus(dir);
        } catch (FileNotFoundException none) {
            return State.NEW;
        }
        boolean pending = false;
        for (FileStatus record : records) {
            String name = record.getPath().getName();
            long n = number(name);
            if (name.endsWith(COMMITTED) && n >= batch) {
                return State.COMMITTED;
            }
            pending |= name.equals(batch + PENDING);
            if (n >= 0 && n < batch) {
                earlier.add(record.getPath());  // forgotten once this batch is recorded
                if (name.endsWith(PENDING)) {
                    unfinished.add(n);
                }
            }
        }
        return pending ? State.PENDING : State.NEW;
    }

    /** The earlier batches {@link #state} found cut off part-way: finish each
     *  ({@link #finish}) before the batch is written. */
    public List<Long> unfinished() {
        return Collections.unmodifiableList(unfinished);
    }

    /** Run {@code write}, the batch's write, with its job commit recorded here
     *  ({@link #pending}, called by Staging.commitJob on this thread); {@code undoable}: the
     *  record names the id of the job's files, for {@link #undo} (a Hive-format table's
     *  batch; a record of another table keeps the two lines earlier versions read). */
    public void recording(long batch, boolean undoable, Runnable write) {
        SparkContext sc = SparkContext$.MODULE$.getActive().get();
        sc.setLocalProperty(RECORDING, dir + "\t" + batch + (undoable ? "\t" + UNDOABLE : ""));
        try {
            write.run();
        } finally {
            sc.setLocalProperty(RECORDING, null);
        }
    }

    /** The job commit of a recorded batch's write begins ({@code committer}'s job staging,
     *  about to move into its output): record it as pending. Nothing outside a recorded
     *  write. Returns whether it was one. */
    static boolean pending(FileOutputCommitter committer, JobContext job)
            throws IOException {
        SparkContext sc = SparkContext$.MODULE$.getActive().getOrElse(() -> null);
        String recording = sc == null ? null : sc.getLocalProperty(RECORDING);
        if (recording == null) {
            return false;
        }
        String[] parts = recording.split("\t");
        Path record = new Path(parts[0], parts[1] + PENDING);
        FileSystem fs = recordsOn(record.getFileSystem(job.getConfiguration()));
        String content = committer.getOutputPath() + "\n" + committer.getJobAttemptPath(job);
        if (parts.length > 2 && UNDOABLE.equals(parts[2])) {
            content += "\n" + job.getConfiguration().get(FILES_NAMED_BY, "");
        }
        write(fs, record, content.getBytes(StandardCharsets.UTF_8));
        return true;
    }

    /** A pending record's lines: the job's output, its staging and the id its files are
     *  named by (null where the record has none: not a Hive-format table's, or an earlier
     *  version's). */
    private static String[] lines(FileSystem fs, Path record) throws IOException {
        try (InputStream in = fs.open(record)) {
            ByteArrayOutputStream bytes = new ByteArrayOutputStream();
            IOUtils.copyBytes(in, bytes, 4096, false);
            return Arrays.copyOf(new String(bytes.toByteArray(), StandardCharsets.UTF_8)
                .split("\n", 3), 3);
        }
    }

    /** Write {@code content} as the record {@code record} (replacing one of that name):
     *  through {@code fs}; on the local file system, with Java's own file I/O, since
     *  Hadoop's local create sets the new file's permission by running chmod where Hadoop's
     *  native library is missing (a process forked per record: milliseconds a batch). */
    private static void write(FileSystem fs, Path record, byte[] content) throws IOException {
        if (fs instanceof RawLocalFileSystem) {
            java.nio.file.Path file = ((RawLocalFileSystem) fs).pathToFile(record).toPath();
            Files.createDirectories(file.getParent());
            Files.write(file, content);
            return;
        }
        try (OutputStream out = fs.create(record, true)) {
            out.write(content);
        }
    }

    /** Has the job commit of the recorded batch running on this thread begun to move
     *  {@code committer}'s files (its pending record names the job's staging)? Then a failure
     *  from here on must keep what is still staged. */
    static boolean moving(FileOutputCommitter committer, JobContext job)
            throws IOException {
        SparkContext sc = SparkContext$.MODULE$.getActive().getOrElse(() -> null);
        String recording = sc == null ? null : sc.getLocalProperty(RECORDING);
        if (recording == null) {
            return false;
        }
        String[] parts = recording.split("\t");
        Path record = new Path(parts[0], parts[1] + PENDING);
        FileSystem fs = recordsOn(record.getFileSystem(job.getConfiguration()));
        return fs.exists(record)
            && committer.getJobAttemptPath(job).toString().equals(lines(fs, record)[1]);
    }

    /** Finish batch {@code batch}'s commit, cut off part-way: move what its job still has
     *  staged (its committed tasks' files) into the output, as Hadoop's job commit does, each
     *  file once (a file moved before is no longer staged), after the same fence. The caller
     *  holds the batch's locks. Returns whether anything was still staged. */
    public boolean finish(long batch) throws IOException {
        String[] paths = lines(fs, new Path(dir, batch + PENDING));
        Path output = new Path(paths[0]);
        Path staged = new Path(paths[1]);
        if (!fs.exists(staged)) {
            return false;
        }
        CommitFence.check();
        for (FileStatus task : fs.listStatus(staged)) {
            if (!task.getPath().getName().startsWith("_")) {  // _temporary: tasks not committed
                move(task.getPath(), output);
            }
        }
        Staging.remove(staged, conf);
        return true;
    }

    /** Undo batch {@code batch}'s write, cut off part-way or failed, in a table whose files
     *  Hive's load moved in one by one, which zklock can neither finish nor check: every
     *  file of its job (named by the job's id, wherever it got to: the table, its
     *  partitions, Hive's and zklock's staging) below each of {@code places} (the table's
     *  directory and its partitions' locations outside it) is deleted. Its pending record
     *  stays until the batch is written again (its job commit replaces it): a move Hive
     *  still makes after this (its loads run on threads of their own, which a failure does
     *  not wait for) is undone by the next run. The caller holds the batch's locks.
     *  Returns whether the batch had a pending record. */
    public boolean undo(long batch, List<Path> places) throws IOException {
        Path record = new Path(dir, batch + PENDING);
        if (!fs.exists(record)) {
            return false;
        }
        String id = lines(fs, record)[2];
        if (id == null || !isUuid(id)) {
            throw new IOException("zklock: batch " + batch + "'s record (" + record + ") does"
                + " not name its files: remove what it wrote by hand, then the record");
        }
        CommitFence.check();
        for (Path place : places) {
            if (fs.exists(place)) {
                deleteFilesOf(id, place);
            }
        }
        return true;
    }

    /** Whether {@code id} is a UUID as Spark names a job's files by: nothing shorter can
     *  match another job's file. */
    private static boolean isUuid(String id) {
        try {
            return UUID.fromString(id).toString().equals(id);
        } catch (IllegalArgumentException e) {
            return false;
        }
    }

    /** Delete every file below {@code under} whose name carries {@code id}, the records
     *  apart. */
    private void deleteFilesOf(String id, Path under) throws IOException {
        for (FileStatus entry : fs.listStatus(under)) {
            Path path = entry.getPath();
            if (entry.isDirectory()) {
                if (!path.getName().equals(RECORDS)) {
                    deleteFilesOf(id, path);
                }
            } else if (path.getName().contains(id) && !fs.delete(path, false)) {
                throw new IOException("zklock: cannot delete " + path);
            }
        }
    }

    /** Hadoop's v1 merge of a committed task's directory into the output. */
    private void move(Path from, Path to) throws IOException {
        for (FileStatus entry : fs.listStatus(from)) {
            Path target = new Path(to, entry.getPath().getName());
            if (entry.isDirectory() && fs.exists(target)) {
                move(entry.getPath(), target);
            } else if (!fs.rename(entry.getPath(), target)) {
                throw new IOException("zklock: cannot move " + entry.getPath() + " to " + target);
            }
        }
    }

    /** Batch {@code batch} is whole in the table: its pending record becomes the committed
     *  one (a rename), or one is made where its write committed no job; the earlier
     *  records {@link #state} saw are removed. */
    public void committed(long batch) throws IOException {
        Path committed = new Path(dir, batch + COMMITTED);
        if (!fs.rename(new Path(dir, batch + PENDING), committed)) {
            write(fs, committed, new byte[0]);
        }
        for (Path record : earlier) {
            fs.delete(record, false);
        }
        earlier.clear();
    }

    /** The batch a record names; -1 for a file that is not a record. */
    private static long number(String name) {
        int dot = name.indexOf('.');
        try {
            return dot > 0 ? Long.parseLong(name.substring(0, dot)) : -1;
        } catch (NumberFormatException e) {
            return -1;
        }
    }
}
