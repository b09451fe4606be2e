import java.io.IOException;
import java.lang.reflect.Field;
import java.lang.reflect.InvocationTargetException;

/**
 * Starts DynamoDB Local with its HTTP listener bound to -Dddblocal.host (default 127.0.0.1).
 * With -Dddblocal.exitOnStdinEof=true the JVM exits when its standard input closes, that is
 * when the process that started it is gone, so a killed test run leaves no server behind.
 */
public final class PythonDynamoDBLockLoopbackLauncher {
    private static final String[] RUNNERS = {
        "software.amazon.dynamodb.services.local.main.ServerRunner",
        "com.amazonaws.services.dynamodbv2.local.main.ServerRunner",
    };

    public static void main(String[] args) throws Throwable {
        String host = System.getProperty("ddblocal.host", "127.0.0.1");
        if (Boolean.getBoolean("ddblocal.exitOnStdinEof")) {
            Thread watchdog = new Thread(() -> {
                try {
                    while (System.in.read() != -1) {
                        // the parent never writes; wait for end of file
                    }
                } catch (IOException closed) {
                    // treat as end of file
                }
                System.exit(0);
            }, "parent-watchdog");
            watchdog.setDaemon(true);
            watchdog.start();
        }
        Class<?> runner = null;
        for (String name : RUNNERS) {
            try {
                runner = Class.forName(name);
                break;
            } catch (ClassNotFoundException notThisVersion) {
                // try the next package name
            }
        }
        if (runner == null) {
            throw new IllegalStateException("DynamoDB Local's ServerRunner is not on the class path");
        }
        try {
            Object proxy = runner.getMethod("createServerFromCommandLineArgs", String[].class)
                    .invoke(null, (Object) args);
            if (proxy == null) {
                throw new IllegalStateException("DynamoDB Local rejected its arguments");
            }
            Field serverField = proxy.getClass().getDeclaredField("server");
            serverField.setAccessible(true);
            Object server = serverField.get(proxy);
            Object[] connectors = (Object[]) server.getClass().getMethod("getConnectors").invoke(server);
            if (connectors.length == 0) {
                throw new IllegalStateException("DynamoDB Local's Jetty server has no connector");
            }
            for (Object connector : connectors) {
                connector.getClass().getMethod("setHost", String.class).invoke(connector, host);
            }
            proxy.getClass().getMethod("start").invoke(proxy);
            System.err.println("python_dynamodb_lock launcher: listening on " + host + ":"
                    + connectors[0].getClass().getMethod("getLocalPort").invoke(connectors[0]));
        } catch (InvocationTargetException failure) {
            throw failure.getCause();
        }
    }
}
