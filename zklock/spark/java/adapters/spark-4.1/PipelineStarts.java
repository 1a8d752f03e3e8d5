// Declarative pipelines' runs, locked as they start (Spark 4.1 on; engine/PipelineRuns.java):
// a Spark Connect server interceptor. spark-pipelines defines a pipeline's graph in its
// Spark Connect session (CreateDataflowGraph, a DefineOutput per dataset), then starts its
// run (StartRun), which Spark runs on a thread of its own: it creates and alters the
// datasets through the catalog API before any statement. StartRun is the one moment that
// precedes them all, and Spark gives no hook there but the server's interceptors
// (spark.connect.grpc.interceptor.classes, read as the server starts): this one takes the
// run's locks before the command reaches Spark, from the graph Spark registered for it, and
// answers a run it cannot lock with a refusal, so that it never starts.
// An adapter: zklock/spark/jvm.py compiles the newest copy not newer than the installed Spark.
package zklock.adapters;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.UUID;

import org.apache.spark.SparkContext;
import org.apache.spark.connect.proto.ExecutePlanRequest;
import org.apache.spark.connect.proto.PipelineCommand;
import org.apache.spark.sql.connect.service.SessionHolder;
import org.apache.spark.sql.connect.service.SessionKey;
import org.apache.spark.sql.connect.service.SparkConnectService$;
import org.apache.spark.sql.pipelines.graph.GraphRegistrationContext;
import org.apache.spark.sql.pipelines.graph.PersistedView;
import org.apache.spark.sql.pipelines.graph.Table;
import org.apache.spark.sql.pipelines.graph.View;
import org.sparkproject.connect.grpc.Context;
import org.sparkproject.connect.grpc.ForwardingServerCallListener.SimpleForwardingServerCallListener;
import org.sparkproject.connect.grpc.Metadata;
import org.sparkproject.connect.grpc.ServerCall;
import org.sparkproject.connect.grpc.ServerCallHandler;
import org.sparkproject.connect.grpc.ServerInterceptor;
import org.sparkproject.connect.grpc.Status;

import scala.Option;

import zklock.EngineRefusal;
import zklock.Protocol;
import zklock.engine.PipelineRuns;

public final class PipelineStarts implements ServerInterceptor {
    /** Name this interceptor among the application's Spark Connect interceptors, before its
     *  server starts (zklock's plugin, as the SparkContext starts). */
    public static void register(SparkContext sc) {
        String named = sc.conf().get(Protocol.Conf.CONNECT_INTERCEPTORS, "").trim();
        String self = Protocol.JvmClass.PIPELINE_STARTS;
        if (!Arrays.asList(named.split("\\s*,\\s*")).contains(self)) {
            sc.conf().set(Protocol.Conf.CONNECT_INTERCEPTORS,
                named.isEmpty() ? self : named + "," + self);
        }
    }

    @Override
    public <Q, A> ServerCall.Listener<Q> interceptCall(ServerCall<Q, A> call, Metadata headers,
                                                       ServerCallHandler<Q, A> next) {
        return new RunStarts<>(call, next.startCall(call, headers));
    }

    /** A call's requests, a run's start passed on only once its locks are held. */
    private static final class RunStarts<Q, A> extends SimpleForwardingServerCallListener<Q> {
        private final ServerCall<Q, A> call;
        private boolean withheld;  // the request was not passed on: nothing is to run

        RunStarts(ServerCall<Q, A> call, ServerCall.Listener<Q> next) {
            super(next);
            this.call = call;
        }

        @Override
        public void onMessage(Q message) {
            if (!(message instanceof ExecutePlanRequest)) {
                super.onMessage(message);
                return;
            }
            ExecutePlanRequest request = (ExecutePlanRequest) message;
            // the run's operation id names it (its end releases the run's locks): one Spark
            // would make itself is made here, and sent on with the request
            if (request.getOperationId().isEmpty()) {
                request = request.toBuilder().setOperationId(UUID.randomUUID().toString())
                    .build();
            }
            String operation = request.getOperationId();
            String refusal = lockRun(request, operation);
            // (the call's context, cancelled at once when its client leaves: the call's own
            // flag is set only after this callback returns)
            if (refusal == null && Context.current().isCancelled()) {
                PipelineRuns.ended(operation);  // never to start: nothing stays held
                withheld = true;
            } else if (refusal == null) {
                super.onMessage(castBack(request));
            } else {
                withheld = true;
                call.close(Status.FAILED_PRECONDITION.withDescription(refusal), new Metadata());
            }
        }

        @Override
        public void onHalfClose() {
            if (!withheld) {
                super.onHalfClose();
            }
        }
    }

    @SuppressWarnings("unchecked")
    private static <Q> Q castBack(ExecutePlanRequest request) {
        return (Q) request;  // what onMessage was given: an ExecutePlanRequest
    }

    /** Take the locks of the run {@code request} starts, if it starts one, until the end of
     *  {@code operation}: null once held (or when it starts none), else why the run is
     *  refused. */
    private static String lockRun(ExecutePlanRequest request, String operation) {
        if (!request.getPlan().hasCommand()
                || !request.getPlan().getCommand().hasPipelineCommand()) {
            return null;
        }
        PipelineCommand command = request.getPlan().getCommand().getPipelineCommand();
        if (!command.hasStartRun() || command.getStartRun().getDry()) {
            return null;
        }
        String graph = command.getStartRun().getDataflowGraphId();
        try {
            Option<SessionHolder> holder = SparkConnectService$.MODULE$.sessionManager()
                .getIsolatedSessionIfPresent(SessionKey.apply(
                    request.getUserContext().getUserId(), request.getSessionId()));
            if (holder.isEmpty()) {
                return null;  // Spark answers it: no such session
            }
            Option<GraphRegistrationContext> registered =
                holder.get().dataflowGraphRegistry().getDataflowGraph(graph);
            if (registered.isEmpty()) {
                return null;  // Spark answers it: no such graph
            }
            PipelineRuns.hold(holder.get().session(), request.getSessionId(), operation,
                datasets(registered.get()),
                "spark-pipelines run of graph " + graph);
            return null;
        } catch (Throwable e) {  // EngineRefusal: checked to Java
            return e instanceof EngineRefusal ? e.getMessage()
                : ("zklock: refused the pipeline's run: its locks could not be taken: " + e)
                    .split("\n", 2)[0];
        }
    }

    /** The tables and persisted views a run of {@code graph} creates or writes, as Spark
     *  quotes their names (its temporary views are no catalog's, its sinks no table). */
    private static List<String> datasets(GraphRegistrationContext graph) {
        List<String> out = new ArrayList<>();
        scala.collection.Iterator<Table> tables = graph.tables().iterator();
        while (tables.hasNext()) {
            out.add(tables.next().identifier().quotedString());
        }
        scala.collection.Iterator<View> views = graph.views().iterator();
        while (views.hasNext()) {
            View view = views.next();
            if (view instanceof PersistedView) {
                out.add(view.identifier().quotedString());
            }
        }
        return out;
    }
}
