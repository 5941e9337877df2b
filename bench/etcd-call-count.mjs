// Counts every call an etcd3 client makes, in the process (the calls still go to the server): unary
// calls by service and method (all of them pass through the client's connection pool), watches
// created, and keepalive streams (on a session's own timer). etcd speaks gRPC over HTTP/2, where a
// byte-counting proxy as wire-count.mjs would have to decode HPACK headers to name a method.

/** Wraps client's pool, watch() and leaseKeepAlive; returns a counter whose take() reads and resets. */
export function countEtcdCalls(client) {
  let calls = {};
  let watches = 0;
  let keepalives = 0;
  const exec = client.pool.exec.bind(client.pool);
  client.pool.exec = (service, method, ...rest) => {
    calls[`${service}.${method}`] = (calls[`${service}.${method}`] ?? 0) + 1;
    return exec(service, method, ...rest);
  };
  const watch = client.watch.bind(client);
  client.watch = () => {
    watches += 1;
    return watch();
  };
  const keepAlive = client.leaseClient.leaseKeepAlive.bind(client.leaseClient);
  client.leaseClient.leaseKeepAlive = (...args) => {
    keepalives += 1;
    return keepAlive(...args);
  };
  return {
    take() {
      const out = { calls, watches, keepalives };
      calls = {};
      watches = 0;
      keepalives = 0;
      return out;
    },
  };
}
