// Curator's InterProcessMutex measured the way bench/scenarios.mjs measures fencekit, for the
// side-by-side rows of bench/zookeeper.mjs. Compiled at run time by bench/curator.mjs (javac into a
// temp dir); reads one command per line on stdin and answers each with one JSON line on stdout, so
// the Node side can interleave its rounds with fencekit's:
//   uncontended N       -> {"samples":[µs...]}        acquire + release, one client
//   handoff N           -> {"samples":[µs...]}        holder's release() until the waiter holds
//   contend CLIENTS MS  -> {"grants":[n per client]}  each client loops acquire + release for MS
//   quit
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.RetryNTimes;

public class CuratorBench {
  private static String connect;
  private static int round = 0;

  public static void main(String[] args) throws Exception {
    connect = args[0];
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
    try (CuratorFramework client = open()) {
      String line;
      while ((line = in.readLine()) != null) {
        String[] cmd = line.trim().split(" ");
        round++;
        switch (cmd[0]) {
          case "uncontended" -> reply(samples(uncontended(client, Integer.parseInt(cmd[1]))));
          case "handoff" -> reply(samples(handoff(Integer.parseInt(cmd[1]))));
          case "contend" -> reply(grants(contend(Integer.parseInt(cmd[1]), Integer.parseInt(cmd[2]))));
          case "quit" -> {
            return;
          }
          default -> reply("{\"error\":\"unknown command\"}");
        }
      }
    }
  }

  private static CuratorFramework open() throws InterruptedException {
    CuratorFramework c = CuratorFrameworkFactory.newClient(connect, 10_000, 5_000, new RetryNTimes(3, 100));
    c.start();
    if (!c.blockUntilConnected(10, TimeUnit.SECONDS)) throw new IllegalStateException("no connection to " + connect);
    return c;
  }

  private static long[] uncontended(CuratorFramework client, int n) throws Exception {
    InterProcessMutex mutex = new InterProcessMutex(client, "/bench/curator/uncontended");
    long[] out = new long[n];
    for (int i = 0; i < n; i++) {
      long start = System.nanoTime();
      mutex.acquire();
      mutex.release();
      out[i] = System.nanoTime() - start;
    }
    return out;
  }

  /**
   * Two clients take turns; each trial: the waiter queues, settles 20 ms, then the holder releases.
   * A mutex must be released by the thread that acquired it: each side works in its own thread.
   */
  private static long[] handoff(int n) throws Exception {
    String path = "/bench/curator/handoff-" + round;
    ExecutorService[] sides = {Executors.newSingleThreadExecutor(), Executors.newSingleThreadExecutor()};
    try (CuratorFramework a = open(); CuratorFramework b = open()) {
      InterProcessMutex[] mutexes = {new InterProcessMutex(a, path), new InterProcessMutex(b, path)};
      sides[0].submit(() -> {
        mutexes[0].acquire();
        return null;
      }).get();
      int holder = 0;
      long[] out = new long[n];
      for (int i = 0; i < n; i++) {
        InterProcessMutex waiter = mutexes[1 - holder];
        InterProcessMutex held = mutexes[holder];
        Future<Long> heldAt = sides[1 - holder].submit(() -> {
          waiter.acquire();
          return System.nanoTime();
        });
        while (a.getChildren().forPath(path).size() < 2) Thread.onSpinWait();
        Thread.sleep(20);
        long start = System.nanoTime();
        sides[holder].submit(() -> {
          held.release();
          return null;
        }).get();
        out[i] = heldAt.get() - start;
        holder = 1 - holder;
      }
      InterProcessMutex last = mutexes[holder];
      sides[holder].submit(() -> {
        last.release();
        return null;
      }).get();
      return out;
    } finally {
      for (ExecutorService side : sides) side.shutdownNow();
    }
  }

  /** Each contender its own client and thread, acquire + release in a loop for ms. */
  private static long[] contend(int clients, int ms) throws Exception {
    String path = "/bench/curator/contend-" + round;
    List<CuratorFramework> opened = new ArrayList<>();
    try {
      for (int i = 0; i < clients; i++) opened.add(open());
      long[] counts = new long[clients];
      AtomicBoolean stop = new AtomicBoolean(false);
      CountDownLatch done = new CountDownLatch(clients);
      for (int i = 0; i < clients; i++) {
        final int k = i;
        InterProcessMutex m = new InterProcessMutex(opened.get(i), path);
        new Thread(() -> {
          try {
            while (!stop.get()) {
              m.acquire();
              m.release();
              counts[k]++;
            }
          } catch (Exception e) {
            counts[k] = -1;
          }
          done.countDown();
        }).start();
      }
      Thread.sleep(ms);
      stop.set(true);
      done.await();
      return counts;
    } finally {
      for (CuratorFramework c : opened) c.close();
    }
  }

  private static String samples(long[] nanos) {
    StringBuilder sb = new StringBuilder("{\"samples\":[");
    for (int i = 0; i < nanos.length; i++) sb.append(i == 0 ? "" : ",").append(nanos[i] / 1000.0);
    return sb.append("]}").toString();
  }

  private static String grants(long[] counts) {
    StringBuilder sb = new StringBuilder("{\"grants\":[");
    for (int i = 0; i < counts.length; i++) sb.append(i == 0 ? "" : ",").append(counts[i]);
    return sb.append("]}").toString();
  }

  private static void reply(String json) {
    System.out.println(json);
    System.out.flush();
  }
}
