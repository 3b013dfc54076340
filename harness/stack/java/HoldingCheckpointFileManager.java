// Spark's checkpoint file manager (spark.sql.streaming.checkpointFileManagerClass), as the session's own would do it,
// with one addition: the write of commits/N or offsets/N can be held open while the harness kills or freezes the
// driver. Built from this source on first use by streamcert.harness.stack.checkpoint_hold, against the running
// pyspark's jars (the package of CheckpointFileManager is filled in then: Spark moved it between versions).
//
// The protocol, in the folder <checkpoint>/.streamcert-hold (local checkpoints only):
//   arm-<log>             the harness asks: hold the next write of <log>/N with N >= the number the file holds
//   held-<log>-<N>        written here once a write is held (before any byte of <log>/N exists)
//   release-<log>-<N>     the harness lets the held write go; removing arm-<log> lets every held write go
// A held write waits at most HOLD_LIMIT_MS, then goes on: a harness that died never hangs a query.
// No @Override: a method one Spark version's interface lacks is then an extra method here, not a build error.
package streamcert;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.PathFilter;

import @CFM_PACKAGE@.CheckpointFileManager;

public final class HoldingCheckpointFileManager implements CheckpointFileManager {
    private static final String CLASS_KEY = "spark.sql.streaming.checkpointFileManagerClass";
    // the manager the session would have used without holds (none: Spark's default)
    private static final String DELEGATE_KEY = "streamcert.checkpointHold.delegate";
    private static final String HOLD_FOLDER = ".streamcert-hold";
    private static final long HOLD_LIMIT_MS = 300_000L;
    private static final long LOOK_MS = 5L;

    private final CheckpointFileManager delegate;

    public HoldingCheckpointFileManager(Path path, Configuration hadoopConf) {
        Configuration plain = new Configuration(hadoopConf);
        String delegateClass = hadoopConf.get(DELEGATE_KEY);
        if (delegateClass == null || delegateClass.isEmpty()) {
            plain.unset(CLASS_KEY);
        } else {
            plain.set(CLASS_KEY, delegateClass);
        }
        this.delegate = CheckpointFileManager.create(path, plain);
    }

    public CheckpointFileManager.CancellableFSDataOutputStream createAtomic(Path path, boolean overwriteIfPossible) {
        holdIfArmed(path);
        return delegate.createAtomic(path, overwriteIfPossible);
    }

    public FSDataInputStream open(Path path) {
        return delegate.open(path);
    }

    public FileStatus[] list(Path path, PathFilter filter) {
        return delegate.list(path, filter);
    }

    public FileStatus[] list(Path path) {
        return delegate.list(path);
    }

    public void mkdirs(Path path) {
        delegate.mkdirs(path);
    }

    public boolean exists(Path path) {
        return delegate.exists(path);
    }

    public void delete(Path path) {
        delegate.delete(path);
    }

    public boolean isLocal() {
        return delegate.isLocal();
    }

    public Path createCheckpointDirectory() {
        return delegate.createCheckpointDirectory();
    }

    public void close() {
        delegate.close();
    }

    private static void holdIfArmed(Path path) {
        Path logDir = path.getParent();
        if (logDir == null || logDir.getParent() == null) {
            return;
        }
        String log = logDir.getName();
        if (!log.equals("commits") && !log.equals("offsets")) {
            return;
        }
        long batch;
        try {
            batch = Long.parseLong(path.getName());
        } catch (NumberFormatException notABatch) {
            return;
        }
        String scheme = logDir.getParent().toUri().getScheme();
        if (scheme != null && !scheme.equals("file")) {
            return;
        }
        java.nio.file.Path folder = Paths.get(logDir.getParent().toUri().getPath(), HOLD_FOLDER);
        java.nio.file.Path arm = folder.resolve("arm-" + log);
        Long from = armedFrom(arm);
        if (from == null || batch < from) {
            return;
        }
        java.nio.file.Path release = folder.resolve("release-" + log + "-" + batch);
        try {
            java.nio.file.Path held = folder.resolve("held-" + log + "-" + batch);
            java.nio.file.Path partial = folder.resolve(".held-" + log + "-" + batch + ".tmp");
            String note = ProcessHandle.current().pid() + " " + System.currentTimeMillis() + "\n";
            Files.write(partial, note.getBytes(StandardCharsets.UTF_8));
            Files.move(partial, held, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
        } catch (IOException cannotSay) {
            return;  // a hold the harness cannot see is no hold: the write goes on
        }
        long deadline = System.currentTimeMillis() + HOLD_LIMIT_MS;
        while (Files.exists(arm) && !Files.exists(release) && System.currentTimeMillis() < deadline) {
            try {
                Thread.sleep(LOOK_MS);
            } catch (InterruptedException stopped) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    private static Long armedFrom(java.nio.file.Path arm) {
        try {
            return Long.parseLong(new String(Files.readAllBytes(arm), StandardCharsets.UTF_8).trim());
        } catch (IOException | NumberFormatException notArmed) {
            return null;
        }
    }
}
