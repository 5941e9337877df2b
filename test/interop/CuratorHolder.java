import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.RetryForever;

/**
 * One Curator InterProcessMutex holder, for the failure model: what Curator tells its holder under
 * a fault, to compare with fencekit on the same ensemble. Arguments: connectString, lock path,
 * session timeout (ms). Prints one line per event: "granted <sessionId hex>", "state <SUSPENDED|
 * RECONNECTED|LOST|…>"; stdin "release" releases the lock ("released" or "error …"), "quit" ends.
 * The connection timeout is the session timeout, as CuratorFrameworkFactory's callers usually set it.
 */
public final class CuratorHolder {
  public static void main(String[] args) throws Exception {
    int sessionMs = Integer.parseInt(args[2]);
    CuratorFramework client =
        CuratorFrameworkFactory.newClient(args[0], sessionMs, sessionMs, new RetryForever(100));
    client.getConnectionStateListenable().addListener((c, state) -> say("state " + state));
    client.start();
    client.blockUntilConnected(20, TimeUnit.SECONDS);
    InterProcessMutex mutex = new InterProcessMutex(client, args[1]);
    mutex.acquire();
    say("granted " + Long.toHexString(client.getZookeeperClient().getZooKeeper().getSessionId()));
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
    String line;
    while ((line = in.readLine()) != null && !line.equals("quit")) {
      if (line.equals("release")) {
        try {
          mutex.release();
          say("released");
        } catch (Exception e) {
          say("error " + e.getClass().getSimpleName());
        }
      }
    }
    client.close();
  }

  private static synchronized void say(String line) {
    System.out.println(line);
    System.out.flush();
  }
}
