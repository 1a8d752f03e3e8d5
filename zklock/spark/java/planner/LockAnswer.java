// The one answer zklock's planner gives, the same over py4j (a classic session) and over
// Spark Connect (the plugin): a versioned JSON document that zklock/spark/answer.py reads.
//
//   {"version": 1, "kind": "command" | "query",
//    "targets": [{"db": "sales", "table": "orders", "partition": [["ds", "1"]], "mode": "X"}],
//    "notes": ["..."], "recheck": true}
// ("recheck", only when true: the locks were planned on what exists now, a CREATE ... IF NOT
// EXISTS of an existing object taking S; plan the statement again once they are held.
// "whole", only when true: a SQL script, whose locks its caller holds for the whole script)
//   {"version": 1, "kind": "refused", "refusal": "unsupported" | "invalid_arguments",
//    "message": "..."}
//
// Targets are what the statement needs, as Spark names them (table null for a database,
// partition values unescaped): the Python side validates them as lock objects (a bad name is
// the third refusal, "invalid object"), adds parents in S and orders them, each with its one
// definition (objects.py, lockrequest.py). Spark's own errors (ParseException,
// AnalysisException) are thrown, never answered.
package zklock.planner;

import java.util.Collections;
import java.util.Arrays;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import zklock.Protocol;
import zklock.Protocol.Field;
import zklock.Protocol.Mode;

public final class LockAnswer {
    /** The answer's format; answer.py refuses any other. */
    public static final int VERSION = Protocol.Version.ANSWER;

    private static final ObjectMapper JSON = new ObjectMapper();

    /** One lock a statement needs: an object as Spark names it, and S or X. */
    public static final class Target {
        public final String db;
        public final String table;                // null: the database itself
        final List<String[]> partition;    // (column, value) pairs, leading columns first
        final String mode;

        Target(String db, String table, List<String[]> partition, String mode) {
            this.db = db;
            this.table = table;
            this.partition = partition;
            this.mode = mode;
        }

        static Target database(String db, String mode) {
            return new Target(db, null, Collections.emptyList(), mode);
        }

        Map<String, Object> json() {
            Map<String, Object> out = new LinkedHashMap<>();
            out.put(Field.DB, db);
            out.put(Field.TABLE, table);
            List<List<String>> spec = new ArrayList<>();
            for (String[] kv : partition) {
                spec.add(Arrays.asList(kv[0], kv[1]));
            }
            out.put(Field.PARTITION, spec);
            out.put(Field.MODE, mode);
            return out;
        }
    }

    /** Why a statement is not run: planner.py's UnsupportedStatement or InvalidArguments. */
    public static final class Refusal extends RuntimeException {
        private static final long serialVersionUID = 1L;
        final String kind;

        public Refusal(String kind, String message) {
            super(message, null, false, false);
            this.kind = kind;
        }
    }

    static Refusal unsupported(String message) {
        return new Refusal(Protocol.Refusal.UNSUPPORTED, message);
    }

    public static Refusal invalidArguments(String message) {
        return new Refusal(Protocol.Refusal.INVALID_ARGUMENTS, message);
    }

    /** The first line of an exception's message, for a one-line note or refusal. */
    static String firstLine(Throwable e) {
        String text = e.getMessage() == null ? "" : e.getMessage().trim();
        if (text.isEmpty()) {
            return e.getClass().getSimpleName();
        }
        return text.split("\\R", 2)[0];
    }

    private final Map<String, Object> fields = new LinkedHashMap<>();

    private LockAnswer(String kind) {
        fields.put(Field.VERSION, VERSION);
        fields.put(Field.KIND, kind);
    }

    static LockAnswer locks(boolean command, List<Target> targets, List<String> notes,
                            boolean recheck) {
        return locks(command, targets, notes, recheck, false);
    }

    /** ... {@code whole}: a SQL script, which Spark runs statement by statement with no hook
     *  around the whole: its caller holds the locks for all of it. */
    static LockAnswer locks(boolean command, List<Target> targets, List<String> notes,
                            boolean recheck, boolean whole) {
        LockAnswer answer = new LockAnswer(command ? Protocol.Kind.COMMAND : Protocol.Kind.QUERY);
        if (recheck) {
            answer.fields.put(Field.RECHECK, true);
        }
        if (whole) {
            answer.fields.put(Field.WHOLE, true);
        }
        List<Map<String, Object>> out = new ArrayList<>();
        for (Target t : targets) {
            out.add(t.json());
        }
        answer.fields.put(Field.TARGETS, out);
        answer.fields.put(Field.NOTES, notes);
        return answer;
    }

    public static LockAnswer refused(Refusal refusal) {
        LockAnswer answer = new LockAnswer(Protocol.Kind.REFUSED);
        answer.fields.put(Field.REFUSAL, refusal.kind);
        answer.fields.put(Field.MESSAGE, refusal.getMessage());
        return answer;
    }

    public String toJson() {
        try {
            return JSON.writeValueAsString(fields);
        } catch (JsonProcessingException e) {
            throw new IllegalStateException("zklock could not write its lock answer: " + e, e);
        }
    }

    @Override
    public String toString() {
        return toJson();
    }

    // ---- answers read back (the engine, re-planning a command after a wait) ----------------

    /** Does {@code held} grant every target of {@code wanted}: the same object, in X or in the
     *  mode wanted? (Parents in S follow from their children: both answers leave them out.) */
    public static boolean covers(JsonNode held, JsonNode wanted) {
        return uncovered(held, wanted) == null;
    }

    /** The first of {@code wanted}'s targets that {@code held} does not cover; null when it
     *  covers them all. */
    public static JsonNode uncovered(JsonNode held, JsonNode wanted) {
        JsonNode rest = remainder(held, wanted).path(Field.TARGETS);
        return rest.size() == 0 ? null : rest.get(0);
    }

    /** {@code wanted} with only the targets {@code held} does not cover. A held target
     *  covers the same object, in X or in the mode wanted, and, in X, every object below it
     *  (a table's partitions, a database's tables): no other holder can hold anything there,
     *  since a lock below takes S on each parent. The one cover rule: a block's statements,
     *  a session's own locks and a Spark Connect client's claim are all judged by it. */
    public static ObjectNode remainder(JsonNode held, JsonNode wanted) {
        ObjectNode out = wanted.deepCopy();
        ArrayNode rest = out.putArray(Field.TARGETS);
        for (JsonNode w : wanted.path(Field.TARGETS)) {
            boolean found = false;
            for (JsonNode h : held.path(Field.TARGETS)) {
                boolean exclusive = Mode.EXCLUSIVE.equals(h.path(Field.MODE).asText());
                boolean shared = Mode.SHARED.equals(w.path(Field.MODE).asText());
                if ((sameObject(h, w) && (exclusive || shared))
                        || (exclusive && contains(h, w))) {
                    found = true;
                    break;
                }
            }
            if (!found) {
                rest.add(w);
            }
        }
        return out;
    }

    /** Is {@code below}'s object strictly inside {@code above}'s (a partition of a table, a
     *  longer partition prefix, a table of a database)? */
    public static boolean contains(JsonNode above, JsonNode below) {
        if (!above.path(Field.DB).equals(below.path(Field.DB))) {
            return false;
        }
        if (!above.path(Field.TABLE).isTextual()) {
            return below.path(Field.TABLE).isTextual();
        }
        if (!above.path(Field.TABLE).equals(below.path(Field.TABLE))) {
            return false;
        }
        JsonNode a = above.path(Field.PARTITION);
        JsonNode b = below.path(Field.PARTITION);
        if (b.size() <= a.size()) {
            return false;
        }
        for (int i = 0; i < a.size(); i++) {
            if (!a.get(i).equals(b.get(i))) {
                return false;
            }
        }
        return true;
    }

    /** An answer asking for the targets of both (the Python side merges duplicates, X
     *  winning), with no recheck left. */
    public static JsonNode union(JsonNode first, JsonNode second) {
        ObjectNode out = first.deepCopy();
        ArrayNode targets = out.putArray(Field.TARGETS);
        first.path(Field.TARGETS).forEach(targets::add);
        second.path(Field.TARGETS).forEach(targets::add);
        out.remove(Field.RECHECK);
        return out;
    }

    public static boolean sameObject(JsonNode a, JsonNode b) {
        return a.path(Field.DB).equals(b.path(Field.DB)) && a.path(Field.TABLE).equals(b.path(Field.TABLE))
            && a.path(Field.PARTITION).equals(b.path(Field.PARTITION));
    }
}
