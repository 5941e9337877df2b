import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.retry.ExponentialBackoffRetry;

/**
 * The Curator side of `npm run bench semaphore`: <contenders> threads, each with its own client (as
 * separate processes would have), take and return one lease of InterProcessSemaphoreV2(<path>,
 * <limit>) for <seconds>, holding it <holdMs>. Prints one JSON line: handovers (grants to another
 * contender than the last to release), acquisitions, wait p50 in ms, per-contender min and max.
 */
public final class CuratorSemaphoreBench {
  public static void main(String[] args) throws Exception {
    String connect = args[0];
    String path = args[1];
    int limit = Integer.parseInt(args[2]);
    int contenders = Integer.parseInt(args[3]);
    long seconds = Long.parseLong(args[4]);
    long holdMs = Long.parseLong(args[5]);
    List<CuratorFramework> clients = new ArrayList<>();
    for (int i = 0; i < contenders; i++) {
      CuratorFramework c = CuratorFrameworkFactory.newClient(connect, 10000, 5000, new ExponentialBackoffRetry(100, 3));
      c.start();
      c.blockUntilConnected(20, TimeUnit.SECONDS);
      clients.add(c);
    }
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
    AtomicInteger handovers = new AtomicInteger();
    AtomicInteger lastReleaser = new AtomicInteger(-1);
    int[] counts = new int[contenders];
    List<Double> waits = java.util.Collections.synchronizedList(new ArrayList<>());
    List<Thread> threads = new ArrayList<>();
    for (int i = 0; i < contenders; i++) {
      final int me = i;
      final InterProcessSemaphoreV2 sem = new InterProcessSemaphoreV2(clients.get(i), path, limit);
      Thread t = new Thread(() -> {
        try {
          while (System.nanoTime() < deadline) {
            long asked = System.nanoTime();
            Lease lease = sem.acquire();
            waits.add((System.nanoTime() - asked) / 1e6);
            counts[me]++;
            if (lastReleaser.get() != me) handovers.incrementAndGet();
            if (holdMs > 0) Thread.sleep(holdMs);
            lastReleaser.set(me);
            sem.returnLease(lease);
          }
        } catch (Exception e) {
          throw new RuntimeException(e);
        }
      });
      threads.add(t);
      t.start();
    }
    for (Thread t : threads) t.join();
    for (CuratorFramework c : clients) c.close();
    Double[] sorted = waits.toArray(new Double[0]);
    Arrays.sort(sorted);
    int total = Arrays.stream(counts).sum();
    System.out.printf(
        "{\"handovers\":%d,\"acquisitions\":%d,\"waitP50Ms\":%.2f,\"min\":%d,\"max\":%d}%n",
        handovers.get(), total, sorted.length == 0 ? Double.NaN : sorted[sorted.length / 2],
        Arrays.stream(counts).min().orElse(0), Arrays.stream(counts).max().orElse(0));
  }
}
