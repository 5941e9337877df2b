import { afterEach, describe, expect, it, vi } from 'vitest';
import { refusalFence, WaiterInbox } from '../../adapters/redis/hand-over.js';

// WaiterInbox reads the monotonic clock through performance.now(): fake timers move it.
describe('Redis waiter inbox: when a handed-over grant may be taken without a call', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('fair: only notices for this waiter count; a handed grant is counted from the last refusal', () => {
    vi.useFakeTimers();
    const inbox = new WaiterInbox('me', true);
    const sentAt = performance.now();
    vi.advanceTimersByTime(2);
    inbox.refused(sentAt, 7n);
    expect(inbox.notice('someone-else 7')).toBe(false);
    expect(inbox.noticed).toBe(false);
    expect(inbox.notice('me 8')).toBe(true);
    expect(inbox.noticed).toBe(true);
    expect(inbox.handed(3_000)).toEqual({ token: 8n, sentAt, rttMs: 2 });
  });

  it('no handed grant before any attempt was answered: the next attempt adopts it instead', () => {
    const inbox = new WaiterInbox('me', true);
    inbox.notice('me 8');
    expect(inbox.noticed).toBe(true);
    expect(inbox.handed(3_000)).toBeUndefined();
  });

  it('too little of the lease left (last refusal over ttl/3 ago): ask again instead', () => {
    vi.useFakeTimers();
    const inbox = new WaiterInbox('me', true);
    inbox.refused(performance.now(), 7n);
    inbox.notice('me 8');
    vi.advanceTimersByTime(999);
    expect(inbox.handed(3_000)?.token).toBe(8n);
    vi.advanceTimersByTime(1);
    expect(inbox.handed(3_000)).toBeUndefined();
  });

  it('a refusal answered after the notice voids it and asks for an attempt at once', () => {
    const inbox = new WaiterInbox('me', true);
    inbox.refused(performance.now(), 7n);
    inbox.notice('me 8');
    inbox.noticed = false; // an attempt was sent
    inbox.refused(performance.now(), 8n); // …and Redis said "not yours"
    expect(inbox.handed(3_000)).toBeUndefined();
    expect(inbox.noticed).toBe(true);
  });

  it("a notice heard before its attempt's refusal counts when its token is above that refusal's fence", () => {
    vi.useFakeTimers();
    const inbox = new WaiterInbox('me', true);
    const sentAt = performance.now();
    expect(inbox.notice('me 8')).toBe(true); // the PUBLISH overtook the reply on the other connection
    vi.advanceTimersByTime(2);
    inbox.refused(sentAt, 7n); // the grant (8) came after the refusal (counter at 7)
    expect(inbox.handed(3_000)).toEqual({ token: 8n, sentAt, rttMs: 2 });
  });

  it('a notice heard before a refusal whose fence has reached its token is void: ask again at once', () => {
    const inbox = new WaiterInbox('me', true);
    inbox.notice('me 8');
    inbox.noticed = false; // an attempt was sent
    inbox.refused(performance.now(), 8n); // that grant was made before this refusal, and is gone
    expect(inbox.handed(3_000)).toBeUndefined();
    expect(inbox.noticed).toBe(true);
  });

  it('not fair: any notice wakes the waiter, but only its own id with a token hands it the key', () => {
    const inbox = new WaiterInbox('me', false);
    inbox.refused(performance.now(), 7n);
    expect(inbox.notice('other')).toBe(true);
    expect(inbox.handed(3_000)).toBeUndefined();
    expect(inbox.notice('me')).toBe(true);
    expect(inbox.handed(3_000)).toBeUndefined();
    expect(inbox.notice('me x')).toBe(true); // not a token
    expect(inbox.handed(3_000)).toBeUndefined();
  });

  it('a refusal without a fence (the counter lost while the lock key stayed) lets no notice hand a grant', () => {
    const inbox = new WaiterInbox('me', true);
    inbox.refused(performance.now(), refusalFence([-5, null]));
    expect(inbox.notice('me 8')).toBe(true); // a wake-up…
    expect(inbox.noticed).toBe(true);
    expect(inbox.handed(3_000)).toBeUndefined(); // …but the next attempt decides
    inbox.notice('me 9');
    inbox.refused(performance.now(), refusalFence([-5, null])); // heard before it: void too
    expect(inbox.handed(3_000)).toBeUndefined();
  });

  it('reads a fence only from a count', () => {
    expect(refusalFence([-1, '12'])).toBe(12n);
    expect(refusalFence([-1, null])).toBeNull();
    expect(refusalFence([-1, '1e5'])).toBeNull();
    expect(refusalFence([-1, ''])).toBeNull();
  });
});
