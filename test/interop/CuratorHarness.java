import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.retry.ExponentialBackoffRetry;

/**
 * Drives Apache Curator's InterProcessMutex, InterProcessReadWriteLock and InterProcessSemaphoreV2
 * for fencekit's interop tests. One command per stdin line, "<id> <verb> <handle> <args…>"; one
 * reply per command on stdout, "<id> <result>":
 *   <id> mutex <handle> <path>                → ok
 *   <id> rwlock <handle> <path> <read|write>  → ok   (the read or the write lock of its own InterProcessReadWriteLock)
 *   <id> semaphore <handle> <path> <limit>    → ok
 *   <id> acquire <handle> <timeoutMs>         → granted | timeout   (a semaphore handle holds one lease)
 *   <id> release <handle>                     → released
 * Each handle's commands run in order on a thread of its own: Curator's locks must be released by
 * the thread that acquired them. Handles run in parallel.
 */
public final class CuratorHarness {
  private static final Map<String, InterProcessMutex> mutexes = new ConcurrentHashMap<>();
  private static final Map<String, InterProcessSemaphoreV2> semaphores = new ConcurrentHashMap<>();
  private static final Map<String, Lease> leases = new ConcurrentHashMap<>();

  public static void main(String[] args) throws Exception {
    CuratorFramework client = CuratorFrameworkFactory.newClient(args[0], 4000, 4000, new ExponentialBackoffRetry(100, 3));
    client.start();
    client.blockUntilConnected(20, TimeUnit.SECONDS);
    Map<String, ExecutorService> lanes = new ConcurrentHashMap<>();
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
    String line;
    while ((line = in.readLine()) != null && !line.equals("quit")) {
      final String[] words = line.trim().split(" ");
      String handle = words.length > 2 ? words[2] : "";
      lanes.computeIfAbsent(handle, h -> Executors.newSingleThreadExecutor())
          .submit(() -> reply(words[0], run(client, words)));
    }
    for (ExecutorService lane : lanes.values()) lane.shutdownNow();
    client.close();
  }

  private static synchronized void reply(String id, String result) {
    System.out.println(id + " " + result);
    System.out.flush();
  }

  private static String run(CuratorFramework client, String[] w) {
    try {
      switch (w[1]) {
        case "mutex":
          mutexes.put(w[2], new InterProcessMutex(client, w[3]));
          return "ok";
        case "rwlock": {
          InterProcessReadWriteLock rw = new InterProcessReadWriteLock(client, w[3]);
          mutexes.put(w[2], w[4].equals("read") ? rw.readLock() : rw.writeLock());
          return "ok";
        }
        case "semaphore":
          semaphores.put(w[2], new InterProcessSemaphoreV2(client, w[3], Integer.parseInt(w[4])));
          return "ok";
        case "acquire": {
          long timeout = Long.parseLong(w[3]);
          InterProcessMutex mutex = mutexes.get(w[2]);
          if (mutex != null) return mutex.acquire(timeout, TimeUnit.MILLISECONDS) ? "granted" : "timeout";
          Lease lease = semaphores.get(w[2]).acquire(timeout, TimeUnit.MILLISECONDS);
          if (lease == null) return "timeout";
          leases.put(w[2], lease);
          return "granted";
        }
        case "release": {
          InterProcessMutex mutex = mutexes.get(w[2]);
          if (mutex != null) mutex.release();
          else semaphores.get(w[2]).returnLease(leases.remove(w[2]));
          return "released";
        }
        default:
          return "error unknown verb " + w[1];
      }
    } catch (Exception e) {
      return "error " + e.getClass().getSimpleName() + ": " + e.getMessage();
    }
  }
}
