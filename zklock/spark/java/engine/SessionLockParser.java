// Spark's parser, but for LOCK and UNLOCK TABLE (or DATABASE), which it refuses as Hive
// commands it does not run ("Operation not allowed"): those are parsed as Spark's RESET
// command of a key no one can type (it begins with a NUL), which zklock's strategy plans as a
// SessionLockExec (LockedCommands.java), read by zklock's own parser when it runs
// (SessionLocks.java); only the first two words are looked at here. A RESET because it has
// the shape wanted (a leaf command of one string, run eagerly, no output) on every Spark
// line, and Java cannot extend Spark's case classes. A proxy of Spark's parser interface,
// which changes between Spark lines, so that every other method (and any a later line
// adds) is Spark's own.
package zklock.engine;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.util.regex.Pattern;

import org.apache.spark.sql.catalyst.parser.ParserInterface;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.execution.command.ResetCommand;

public final class SessionLockParser {
    /** LOCK|UNLOCK TABLE|DATABASE|SCHEMA at the start, after blanks and comments. */
    private static final Pattern SESSION_LOCK = Pattern.compile(
        "\\A(?:\\s|--[^\\n]*(?:\\n|\\z)|/\\*.*?\\*/)*(?:UN)?LOCK\\s+(?:TABLE|DATABASE|SCHEMA)\\b",
        Pattern.CASE_INSENSITIVE | Pattern.DOTALL);

    /** What the key of the RESET standing for a session lock begins with. */
    private static final String MARKER = "\u0000zklock session lock\u0000";

    private SessionLockParser() {
    }

    /** The statement {@code plan} stands for, when it is a session lock's; else null. */
    static String statement(LogicalPlan plan) {
        if (plan instanceof ResetCommand) {
            scala.Option<String> key = ((ResetCommand) plan).config();
            if (key.isDefined() && key.get().startsWith(MARKER)) {
                return key.get().substring(MARKER.length());
            }
        }
        return null;
    }

    /** Spark's {@code parser}, with zklock's session locks. */
    public static ParserInterface wrap(ParserInterface parser) {
        return (ParserInterface) Proxy.newProxyInstance(SessionLockParser.class.getClassLoader(),
            new Class<?>[] {ParserInterface.class}, (proxy, method, args) -> {
                if (isPlanParse(method, args) && SESSION_LOCK.matcher((String) args[0]).find()) {
                    return new ResetCommand(scala.Option.apply(MARKER + args[0]));
                }
                if (method.getDeclaringClass() == Object.class) {
                    return objectMethod(proxy, parser, method, args);
                }
                try {
                    return method.invoke(parser, args);
                } catch (InvocationTargetException e) {
                    throw e.getCause();
                }
            });
    }

    /** parsePlan(sql), or parsePlanWithParameters(sql, ...) (Spark 4). */
    private static boolean isPlanParse(Method method, Object[] args) {
        return method.getName().startsWith("parsePlan") && args != null && args.length >= 1
            && args[0] instanceof String;
    }

    private static Object objectMethod(Object proxy, ParserInterface parser, Method method,
                                       Object[] args) {
        switch (method.getName()) {
            case "equals":
                return proxy == args[0];
            case "hashCode":
                return System.identityHashCode(proxy);
            default:
                return "zklock(" + parser + ")";
        }
    }
}
