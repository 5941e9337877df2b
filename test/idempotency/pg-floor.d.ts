// pg-floor is pg 8.11.0 (npm:pg@8.11.0), the oldest version the peer range allows: same API as pg.
declare module 'pg-floor' {
  import pg from 'pg';
  export default pg;
}
