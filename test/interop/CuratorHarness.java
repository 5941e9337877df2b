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
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.retry.ExponentialBackoffRetry;

/**
 * Drives Apache Curator's InterProcessMutex and InterProcessSemaphoreV2 for fencekit's interop
 * tests. One command per stdin line, "<id> <verb> <args…>", each run on its own thread; one reply
 * per command on stdout, "<id> <result>":
 *   <id> mutex <handle> <path>             → ok
 *   <id> semaphore <handle> <path> <limit> → ok
 *   <id> acquire <handle> <timeoutMs>      → granted | timeout   (a semaphore handle holds one lease)
 *   <id> release <handle>                  → released
 */
public final class CuratorHarness {
  private static final Map<String, InterProcessMutex> mutexes = new ConcurrentHashMap<>();
  private static final Map<String, InterProcessSemaphoreV2> semaphores = new ConcurrentHashMap<>();
  private static final Map<String, Lease> leases = new ConcurrentHashMap<>();

  public static void main(String[] args) throws Exception {
    CuratorFramework client = CuratorFrameworkFactory.newClient(args[0], 4000, 4000, new ExponentialBackoffRetry(100, 3));
    client.start();
    client.blockUntilConnected(20, TimeUnit.SECONDS);
    ExecutorService pool = Executors.newCachedThreadPool();
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
    String line;
    while ((line = in.readLine()) != null && !line.equals("quit")) {
      final String[] words = line.trim().split(" ");
      pool.submit(() -> reply(words[0], run(client, words)));
    }
    pool.shutdownNow();
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
