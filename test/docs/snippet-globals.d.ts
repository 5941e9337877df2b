// What the documentation's examples take from the reader's application: declared here so that the
// examples stay short. Only the docs check's own program sees this file (tsconfig.json excludes it).

declare const db: { query(sql: string, params?: unknown[]): Promise<{ rowCount: number | null }> };
declare const redis: import('ioredis').Redis;
declare function reconcile(...args: unknown[]): Promise<void>;
declare function sendReport(...args: unknown[]): Promise<void>;
declare function work(...args: unknown[]): Promise<void>;
declare function train(...args: unknown[]): Promise<void>;
declare function handle(...args: unknown[]): Promise<void>;
declare function transfer(...args: unknown[]): Promise<void>;
declare function alert(...args: unknown[]): void;
declare const job: unknown;
declare const tenantId: string;
declare const from: string;
declare const to: string;
