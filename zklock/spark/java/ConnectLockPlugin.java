// zklock's Spark Connect plugin: plans a statement's or a DataFrame's locks where the plans
// are, in the Spark Connect server, with LockPlanner.java, the one planner. A Connect client
// has no Catalyst of its own, so it sends its request as a relation extension and reads the
// answer from the relation's schema.
//
// The request is a google.protobuf.Any with zklock's own type URL (TYPE_URL) whose value is
// a google.protobuf.StringValue holding a JSON object, so that no .proto file of zklock's has
// to be compiled on either side:
//   {"protocol": 1, "op": "plan", "sql": "...", "strict": true, "unknown_statements": "refuse"}
//   {"protocol": 1, "op": "plan", "relation": "<base64 of a spark.connect.Relation>", ...}
//   {"protocol": 1, "op": "write", "table": "db.t", "partition": {"ds": "1"}}  (an object
//    zklock's own SQL names: X on the table or its static partition prefix)
//   {"protocol": 1, "op": "version"}
//   {"protocol": 1, "op": "hold", "answer": <LockAnswer>, "statement": "...", "ttl_ms": n}
//    (a client's block, held by the server's engine for the client's session:
//    engine/ConnectBlocks.java)
//   {"protocol": 1, "op": "renew" | "release", "block": "<its id>"}  (renewed by its
//    client while it runs, released when its time to live passes without)
// A plan request also carries "client": {"version", "build"}: a client whose zklock build
// differs from the plugin's is answered with a refusal of kind "incompatible", so that classic
// and Connect sessions lock by the same rules.
// The answer is LockAnswer's JSON (the same document a classic session gets over py4j), in
// the metadata of the one column of an empty relation; Spark's own errors (ParseException,
// AnalysisException) reach the client as Spark raised them. "version" is answered with one
// row: zklock's plugin version, its protocol, the build hash, the Spark version it was
// compiled for and the one it runs in; "hold" with a row per lock node, the block's id and
// the node (one row, ("", "") when nothing is held), and "release" with one row, the id, or
// its refusal (lost) as the engine's error.
//
// Spark loads it by name: --conf spark.connect.extensions.relation.classes=zklock.ConnectLockPlugin
// with zklock's jar (zklock.spark.jvm.module_jar()) on the server's class path.
package zklock;

import java.io.IOException;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.spark.connect.proto.Relation;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.catalyst.plans.logical.LocalRelation;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.types.DataTypeUtils;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.connect.planner.SparkConnectPlanner;
import org.apache.spark.sql.connect.plugin.RelationPlugin;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.Metadata;
import org.apache.spark.sql.types.MetadataBuilder;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.sparkproject.connect.protobuf.Any;
import org.sparkproject.connect.protobuf.InvalidProtocolBufferException;
import org.sparkproject.connect.protobuf.StringValue;

import scala.collection.immutable.Seq;

import zklock.Protocol.Field;
import zklock.engine.ConnectBlocks;
import zklock.planner.LockAnswer;
import zklock.planner.LockPlanner;
import zklock.planner.NodeKinds;

public final class ConnectLockPlugin implements RelationPlugin {
    /** The type URL of a zklock request (not a registered protobuf message: a name of ours). */
    public static final String TYPE_URL = Protocol.Connect.TYPE_URL;
    /** The request format this plugin reads; the client refuses a plugin with another. */
    public static final int PROTOCOL = Protocol.Version.CONNECT;
    /** What the build wrote about this jar: version, protocol, build hash, Spark version. */
    public static final String PROPERTIES = "/zklock/module.properties";

    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Properties BUILD = new Properties();

    static {
        try (InputStream in = ConnectLockPlugin.class.getResourceAsStream(PROPERTIES)) {
            if (in != null) {
                BUILD.load(in);
            }
        } catch (IOException e) {
            // answered as "unknown" by version requests
        }
    }

    @Override
    public Optional<LogicalPlan> transform(byte[] bytes, SparkConnectPlanner planner) {
        Any any;
        try {
            any = Any.parseFrom(bytes);
        } catch (InvalidProtocolBufferException e) {
            return Optional.empty();
        }
        if (!TYPE_URL.equals(any.getTypeUrl())) {
            return Optional.empty();  // another plugin's extension
        }
        JsonNode request;
        try {
            String text = StringValue
                .parseFrom(any.getValue()).getValue();
            request = JSON.readTree(text);
        } catch (IOException e) {
            throw new IllegalArgumentException("unreadable zklock request: " + e.getMessage());
        }
        SparkSession session = planner.session();
        String op = request.path(Field.OP).asText(Protocol.Op.PLAN);
        if (op.equals(Protocol.Op.VERSION)) {
            return Optional.of(version(session));
        }
        if (op.equals(Protocol.Op.HOLD) || op.equals(Protocol.Op.RELEASE)
                || op.equals(Protocol.Op.RENEW)) {
            return Optional.of(block(request, session));
        }
        return Optional.of(answer(plan(request, planner, session)));
    }

    /** The request's answer (LockAnswer's JSON): the plan, or why there is none. */
    private static String plan(JsonNode request, SparkConnectPlanner planner,
                               SparkSession session) {
        String mismatch = mismatch(request, session);
        if (mismatch != null) {
            return LockAnswer.refused(new LockAnswer.Refusal(Protocol.Refusal.INCOMPATIBLE,
                mismatch)).toJson();
        }
        String op = request.path(Field.OP).asText(Protocol.Op.PLAN);
        LockPlanner locks;
        try {
            locks = new LockPlanner(session, request.path(Field.UNKNOWN_STATEMENTS).asText(null));
        } catch (IllegalArgumentException e) {
            return LockAnswer.refused(LockAnswer.invalidArguments(e.getMessage())).toJson();
        }
        boolean strict = request.path(Field.STRICT).asBoolean(true);
        LogicalPlan relation = relation(request, planner);
        if (op.equals(Protocol.Op.WRITE)) {
            return planWrite(request, locks);
        }
        if (!op.equals(Protocol.Op.PLAN)) {
            return LockAnswer.refused(LockAnswer.invalidArguments("unknown zklock request " + op))
                .toJson();
        }
        if (relation != null) {
            return locks.planPlan(relation, strict);
        }
        if (request.hasNonNull(Field.SQL)) {
            return locks.planSql(request.get(Field.SQL).asText(), strict);
        }
        return LockAnswer.refused(LockAnswer.invalidArguments("a zklock plan request needs sql"
            + " or a relation")).toJson();
    }

    /** The answer to a write request: X on its table, or its static partition prefix. */
    private static String planWrite(JsonNode request, LockPlanner locks) {
        Map<String, String> partition = null;
        if (request.hasNonNull(Field.PARTITION)) {
            partition = new LinkedHashMap<>();
            for (Map.Entry<String, JsonNode> e : request.get(Field.PARTITION).properties()) {
                partition.put(e.getKey(), e.getValue().asText());
            }
        }
        if (!request.hasNonNull(Field.TABLE)) {
            return LockAnswer.refused(LockAnswer.invalidArguments("a zklock write request"
                + " needs a table")).toJson();
        }
        return locks.planWrite(request.get(Field.TABLE).asText(), partition);
    }

    /** Why this plugin cannot answer this client (another protocol, Spark or build); null
     *  when it can. */
    private static String mismatch(JsonNode request, SparkSession session) {
        int protocol = request.path(Field.PROTOCOL).asInt(-1);
        if (protocol != PROTOCOL) {
            return "the zklock plugin of this Spark Connect server speaks protocol " + PROTOCOL
                + ", the client " + protocol + ": use the same zklock version on both sides";
        }
        String builtFor = BUILD.getProperty("spark");
        if (builtFor != null && !builtFor.equals(session.version())) {
            return "the zklock plugin was built for Spark " + builtFor + " and this Spark"
                + " Connect server runs Spark " + session.version() + ": build it for this Spark"
                + " (zklock spark plugin-jar)";
        }
        String build = BUILD.getProperty("build", "unknown");
        String clientBuild = request.path(Field.CLIENT).path(Field.BUILD).asText("");
        if (!clientBuild.isEmpty() && !clientBuild.equals(build)) {
            return "the zklock plugin of this Spark Connect server is zklock "
                + BUILD.getProperty("version", "unknown") + " (build " + build + ") and the"
                + " client is zklock " + request.path(Field.CLIENT).path(Field.VERSION).asText("unknown")
                + " (build " + clientBuild + "): both must plan with the same rules; run the"
                + " server with the client's jar (zklock spark plugin-jar)";
        }
        return null;
    }

    /** The request's "relation" as the plan Spark Connect builds from it; null when the
     *  request has none. */
    private static LogicalPlan relation(JsonNode request, SparkConnectPlanner planner) {
        if (!request.hasNonNull(Field.RELATION)) {
            return null;
        }
        Relation rel;
        try {
            rel = Relation.parseFrom(
                Base64.getDecoder().decode(request.get(Field.RELATION).asText()));
        } catch (IOException | IllegalArgumentException e) {
            throw new IllegalArgumentException("unreadable relation in the zklock request: "
                + e.getMessage());
        }
        return planner.transformRelation(rel);
    }

    /**
     * A plan's answer carried in the schema of an empty relation: one column, ``zklock``,
     * whose metadata holds the answer. The client reads it with Spark Connect's
     * AnalyzePlan (``df.schema``), which runs no Spark job: executing a relation of rows
     * cost about 40 ms a request, the analysis a few. The relation is built directly, not
     * through createDataFrame, which would analyze it once more and build an encoder.
     */
    @SuppressWarnings({"unchecked", "rawtypes"})
    private static LogicalPlan answer(String json) {
        Metadata meta = new MetadataBuilder()
            .putString("zklock", json).build();
        StructType schema = new StructType(new StructField[] {
            new StructField("zklock", DataTypes.StringType, true, meta)});
        Seq attributes =
            DataTypeUtils.toAttributes(schema);
        return LocalRelation.fromExternalRows(
            attributes, (Seq) scala.collection.immutable.Nil$.MODULE$);
    }

    /** A client's block held for its session, or released (ConnectBlocks): rows of the
     *  block's id and its lock nodes. A refusal, a denial or a loss is the engine's error
     *  (EngineRefusal). */
    private static LogicalPlan block(JsonNode request, SparkSession session) {
        String mismatch = mismatch(request, session);
        if (mismatch != null) {
            throw EngineRefusal.refused("zklock: " + mismatch);
        }
        String op = request.path(Field.OP).asText();
        String id = request.path(Field.BLOCK).asText();
        if (op.equals(Protocol.Op.HOLD)) {
            id = ConnectBlocks.hold(session, request.path(Field.ANSWER).toString(),
                request.path(Field.STATEMENT).asText("the block"),
                request.path(Field.TTL_MS).asLong(0));
        } else if (op.equals(Protocol.Op.RENEW)) {
            ConnectBlocks.renew(session, id);
        } else {
            ConnectBlocks.release(session, id);
        }
        List<Row> rows = new ArrayList<>();
        for (String node : ConnectBlocks.nodes(id)) {
            rows.add(RowFactory.create(id, node));
        }
        if (rows.isEmpty()) {
            rows.add(RowFactory.create(id, ""));
        }
        StructType schema = new StructType(new StructField[] {
            DataTypes.createStructField(Field.BLOCK, DataTypes.StringType, false),
            DataTypes.createStructField(Field.NODES, DataTypes.StringType, false)});
        return session.createDataFrame(rows, schema).logicalPlan();
    }

    private static LogicalPlan version(SparkSession session) {
        List<Row> rows = new ArrayList<>();
        rows.add(RowFactory.create(BUILD.getProperty("version", "unknown"), PROTOCOL,
            BUILD.getProperty("build", "unknown"), BUILD.getProperty("spark", "unknown"),
            session.version(), NodeKinds.size()));
        StructType schema = new StructType(new StructField[] {
            DataTypes.createStructField("plugin", DataTypes.StringType, false),
            DataTypes.createStructField("protocol", DataTypes.IntegerType, false),
            DataTypes.createStructField("build", DataTypes.StringType, false),
            DataTypes.createStructField("built_for", DataTypes.StringType, false),
            DataTypes.createStructField("spark", DataTypes.StringType, false),
            DataTypes.createStructField("nodes", DataTypes.IntegerType, false)});
        return session.createDataFrame(rows, schema).logicalPlan();
    }
}
