// The fencekit dashboard page: plain DOM code, no framework and no build step. It reads
// /api/config once, then follows /api/events (server-sent events: `state` with every name, and
// `timeline` entries); a name's detail comes from /api/names/:name. Text from the backend is only
// ever set as textContent, never parsed as HTML.

(() => {
  const view = {
    config: null,
    state: null,
    receivedAt: 0,
    sortKey: 'name',
    sortUp: true,
    selected: null,
    streamDown: false,
    detailAt: 0,
  };
  const $ = (id) => document.getElementById(id);

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (key === 'class') node.className = value;
      else if (key.startsWith('data-')) node.setAttribute(key, value);
      else node[key] = value;
    }
    for (const child of children) {
      if (child !== null && child !== undefined) node.append(child);
    }
    return node;
  }

  function svg(tag, attrs, ...children) {
    const node = document.createElementNS('http://www.w3.org/2000/svg', tag);
    for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
    for (const child of children) node.append(child);
    return node;
  }

  function duration(ms) {
    if (ms === null || ms === undefined) return '–';
    const sign = ms < 0 ? '-' : '';
    const abs = Math.abs(ms);
    if (abs < 60_000) return `${sign}${(abs / 1000).toFixed(1)} s`;
    if (abs < 3_600_000) return `${sign}${Math.floor(abs / 60_000)} m ${Math.floor((abs % 60_000) / 1000)} s`;
    return `${sign}${Math.floor(abs / 3_600_000)} h ${Math.floor((abs % 3_600_000) / 60_000)} m`;
  }

  /** How long ago the state arrived: ages and expiries move on between looks. */
  const drift = () => Date.now() - view.receivedAt;

  function banner() {
    const node = $('banner');
    const state = view.state;
    let text = '';
    if (view.streamDown) text = 'The dashboard server does not answer; reconnecting…';
    else if (state && state.status === 'unavailable')
      text = `Backend unavailable: ${state.error}. Showing the last names seen; this page recovers by itself.`;
    else if (state && state.status === 'starting') text = 'Looking at the backend…';
    node.textContent = text;
    node.hidden = text === '';
    document.body.classList.toggle('outage', text !== '' && !(state && state.status === 'starting'));
  }

  function sortValue(row) {
    const first = row.holders[0];
    switch (view.sortKey) {
      case 'kind':
        return row.kind;
      case 'owner':
        return first ? first.owner || '' : '';
      case 'token':
        // Tokens are 64-bit: compared as zero-padded text, which no Number rounds.
        return first ? first.token.padStart(20, '0') : '';
      case 'age':
        return first && first.ageMs !== null ? first.ageMs : -1;
      case 'expires':
        return first && first.expiresInMs !== null ? first.expiresInMs : Number.MAX_SAFE_INTEGER;
      case 'waiters':
        return row.waiters;
      case 'permits':
        return row.permits ? row.permits.used : -1;
      default:
        return row.name;
    }
  }

  function matches(row, filter) {
    if (!filter) return true;
    const text = [row.name, row.kind, ...row.holders.map((holder) => holder.owner || '')].join(' ');
    return text.toLowerCase().includes(filter);
  }

  /** A cell with a line per holder; a free name says so in the holder column, '–' elsewhere. */
  function holderLines(row, pick, holderColumn = false) {
    if (row.holders.length === 0) {
      const text = !holderColumn ? '–' : row.kind === 'election' ? 'no leader' : 'free';
      return el('span', { class: 'muted' }, text);
    }
    const cell = el('div');
    row.holders.forEach((holder, i) => {
      if (i > 0) cell.append(el('br'));
      cell.append(pick(holder));
    });
    return cell;
  }

  function renderNames() {
    const body = $('names').tBodies[0];
    const state = view.state;
    const rows = state?.names ? state.names.slice() : [];
    const filter = $('filter').value.trim().toLowerCase();
    const shown = rows.filter((row) => matches(row, filter));
    shown.sort((a, b) => {
      const x = sortValue(a);
      const y = sortValue(b);
      const order = x < y ? -1 : x > y ? 1 : a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
      return view.sortUp ? order : -order;
    });
    const since = drift();
    body.replaceChildren(
      ...shown.map((row) => {
        const tr = el(
          'tr',
          { 'data-name': row.name, 'data-kind': row.kind },
          el('td', { class: 'name' }, row.name),
          el('td', { class: 'kind' }, row.kind === 'read-write' ? 'read-write lock' : row.kind),
          el(
            'td',
            { class: 'owner' },
            holderLines(
              row,
              (holder) =>
                `${holder.owner || '(no owner)'}${holder.mode ? ` [${holder.mode}]` : ''}${holder.permits ? ` ×${holder.permits}` : ''}`,
              true,
            ),
          ),
          el(
            'td',
            { class: 'token num' },
            holderLines(row, (holder) => holder.token),
          ),
          el(
            'td',
            { class: 'age num' },
            holderLines(row, (holder) => duration(holder.ageMs === null ? null : holder.ageMs + since)),
          ),
          el(
            'td',
            { class: 'expires num' },
            holderLines(row, (holder) =>
              duration(holder.expiresInMs === null ? null : holder.expiresInMs - since),
            ),
          ),
          el('td', { class: 'waiters num' }, String(row.waiters)),
          el(
            'td',
            { class: 'permits num' },
            row.permits ? `${row.permits.used} / ${row.permits.limit}` : '–',
          ),
        );
        if (row.name === view.selected) tr.classList.add('selected');
        return tr;
      }),
    );
    $('names').classList.toggle('stale', !!state && state.status !== 'ok');
    $('empty').hidden = !state || rows.length > 0;
    $('count').textContent = state?.names ? `${shown.length} of ${rows.length}` : '';
    // An unchanged state is resent only every few seconds, so its time says little while all is well.
    $('updated').textContent =
      state?.status === 'ok'
        ? `live, looked at every ${view.config ? view.config.intervalMs : '?'} ms`
        : state?.at
          ? `last look ${new Date(state.at).toLocaleTimeString()}`
          : '';
    for (const th of $('names').tHead.rows[0].cells) {
      th.classList.toggle('sorted', th.dataset.sort === view.sortKey);
      th.classList.toggle('up', th.dataset.sort === view.sortKey && view.sortUp);
    }
  }

  function timelineText(entry) {
    const who = entry.owner ? ` ${entry.owner}` : '';
    const parts = [`${entry.name}: token ${entry.token}${who}`];
    if (entry.mode) parts.push(entry.mode);
    if (entry.permits) parts.push(`${entry.permits} permit(s)`);
    if (entry.heldMs !== undefined) parts.push(`held ${duration(entry.heldMs)}`);
    if (entry.reason) parts.push(`reason: ${entry.reason}`);
    if (entry.by) parts.push(`by ${entry.by}`);
    return parts.join(', ');
  }

  function timelineItem(entry) {
    return el(
      'li',
      {
        class: `t-${entry.type}`,
        'data-type': entry.type,
        'data-name': entry.name,
        'data-token': entry.token,
      },
      el('span', { class: 'muted' }, `${new Date(entry.at).toLocaleTimeString()} `),
      el('span', { class: 'tag' }, entry.type),
      ` ${timelineText(entry)}`,
    );
  }

  function addTimeline(entry) {
    const list = $('timeline');
    list.prepend(timelineItem(entry));
    while (list.children.length > 300) list.lastElementChild.remove();
    if (entry.name === view.selected) loadDetail();
  }

  /**
   * A row is selected by a press and a release on the same name, heard on the table's body: the
   * rows are drawn again every second, and a click listener on a row loses a click whose press
   * fell on the row that was replaced.
   */
  function followRowClicks() {
    const body = $('names').tBodies[0];
    const nameAt = (event) => event.target.closest('tr[data-name]')?.dataset.name;
    let pressed = null;
    body.addEventListener('pointerdown', (event) => {
      pressed = event.button === 0 ? nameAt(event) : null;
    });
    body.addEventListener('pointerup', (event) => {
      const name = nameAt(event);
      if (event.button === 0 && name !== undefined && name === pressed) select(name);
      pressed = null;
    });
  }

  function select(name) {
    view.selected = view.selected === name ? null : name;
    renderNames();
    loadDetail();
  }

  function tokenChart(grants) {
    if (grants.length === 0)
      return el('p', { class: 'muted' }, 'No grants seen since the dashboard started.');
    const width = 360;
    const height = 90;
    // Tokens are 64-bit: BigInt keeps them exact; only the offsets from the lowest become Numbers.
    const tokens = grants.map((grant) => BigInt(grant.token));
    // biome-ignore lint/complexity/useMathMinMax: Math.min does not take BigInts
    const low = tokens.reduce((a, b) => (b < a ? b : a));
    // biome-ignore lint/complexity/useMathMinMax: Math.max does not take BigInts
    const high = tokens.reduce((a, b) => (b > a ? b : a));
    const span = Number(high - low);
    const x = (i) => 10 + (grants.length === 1 ? 0 : (i * (width - 20)) / (grants.length - 1));
    const y = (token) => height - 15 - (span === 0 ? 0 : (Number(token - low) * (height - 30)) / span);
    const points = tokens.map((token, i) => `${x(i)},${y(token)}`).join(' ');
    return svg(
      'svg',
      { width, height, role: 'img', class: 'token-chart' },
      svg('title', {}, `Fencing tokens of the last ${grants.length} grants`),
      svg('polyline', { points, fill: 'none', stroke: 'currentColor', 'stroke-width': 1.5 }),
      ...tokens.map((token, i) => svg('circle', { cx: x(i), cy: y(token), r: 2.5, fill: 'currentColor' })),
      svg('text', { x: 10, y: height - 2, 'font-size': 10, fill: 'currentColor' }, `${low}`),
      ...(span === 0
        ? []
        : [
            svg(
              'text',
              { x: width - 10, y: 12, 'font-size': 10, 'text-anchor': 'end', fill: 'currentColor' },
              `${high}`,
            ),
          ]),
    );
  }

  function holdChart(times) {
    if (times.length === 0) return el('p', { class: 'muted' }, 'No ended grants seen yet.');
    const bins = [100, 1_000, 10_000, 60_000, 600_000, Number.POSITIVE_INFINITY];
    const labels = ['<0.1s', '<1s', '<10s', '<1m', '<10m', '≥10m'];
    const counts = bins.map(() => 0);
    for (const ms of times) counts[bins.findIndex((limit) => ms < limit)] += 1;
    const most = Math.max(...counts);
    const width = 360;
    const height = 90;
    const step = width / bins.length;
    return svg(
      'svg',
      { width, height, role: 'img', class: 'hold-chart' },
      svg('title', {}, `Hold times of the last ${times.length} grants`),
      ...counts.flatMap((count, i) => {
        const barHeight = most === 0 ? 0 : (count * (height - 30)) / most;
        return [
          svg('rect', {
            x: i * step + 4,
            y: height - 15 - barHeight,
            width: step - 8,
            height: barHeight,
            fill: 'currentColor',
            opacity: 0.6,
          }),
          svg(
            'text',
            {
              x: i * step + step / 2,
              y: height - 2,
              'font-size': 10,
              'text-anchor': 'middle',
              fill: 'currentColor',
            },
            labels[i],
          ),
          svg(
            'text',
            {
              x: i * step + step / 2,
              y: height - 18 - barHeight,
              'font-size': 10,
              'text-anchor': 'middle',
              fill: 'currentColor',
            },
            count ? String(count) : '',
          ),
        ];
      }),
    );
  }

  function forceForm(detail) {
    const holder = detail.holders[0];
    if (!view.config?.allowForceRelease || !holder || !['lock', 'election'].includes(detail.kind))
      return null;
    const reason = el('input', {
      type: 'text',
      placeholder: 'reason (recorded)',
      id: 'force-reason',
      maxLength: 1000,
    });
    const button = el(
      'button',
      { type: 'button', id: 'force-release' },
      `Force-release token ${holder.token}`,
    );
    const result = el('span', { id: 'force-result', class: 'muted' });
    button.addEventListener('click', async () => {
      if (reason.value.trim() === '') {
        result.textContent = 'Say why: the reason is recorded.';
        reason.focus();
        return;
      }
      button.disabled = true;
      try {
        const response = await fetch('/api/force-release', {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ name: detail.name, token: holder.token, reason: reason.value }),
        });
        const answer = await response.json();
        result.textContent = response.ok
          ? answer.released
            ? `Released token ${answer.released.token}.`
            : 'It was not held with that token any more.'
          : `Refused: ${answer.error}`;
      } catch (error) {
        result.textContent = `Failed: ${error}`;
      } finally {
        button.disabled = false;
      }
    });
    return el('div', { class: 'force' }, reason, button, result);
  }

  /** The waiter queue in grant order: owner, how long it has waited, the requests an entry stands for. */
  function queueList(detail) {
    if (!detail.queue) return el('p', { id: 'detail-queue-note', class: 'muted' }, detail.queueNote || '');
    if (detail.queue.length === 0)
      return el('p', { id: 'detail-queue-note', class: 'muted' }, 'Nobody in the queue.');
    const items = detail.queue.map((entry) => {
      const waited = entry.waitingMs === null ? 'waiting' : `waiting ${duration(entry.waitingMs)}`;
      const requests =
        entry.requests === null
          ? 'a process’s line (its length is known there)'
          : `${entry.requests} request${entry.requests === 1 ? '' : 's'}`;
      return el('li', {}, `${entry.owner || '(no owner)'} — ${waited} — ${requests}`);
    });
    return el('ol', { id: 'detail-queue' }, ...items);
  }

  /**
   * The detail's two parts: what it shows, redrawn with each look at the name, and the
   * force-release form, kept while it is for the same grant (name and token), so that a reason
   * being typed, the focus and the last answer outlive the redraws.
   */
  function detailParts() {
    const body = $('detail-body');
    if (body.childElementCount !== 2) {
      body.replaceChildren(el('div', { id: 'detail-info' }), el('div', { id: 'detail-force' }));
    }
    return { body, info: $('detail-info'), force: $('detail-force') };
  }
  let formFor = null;
  function showForceForm(force, detail) {
    const holder = detail?.holders[0];
    const key = holder ? JSON.stringify([detail.name, holder.token]) : null;
    if (key === formFor && force.childElementCount > 0) return;
    const form = detail ? forceForm(detail) : null;
    formFor = form ? key : null;
    force.replaceChildren(...(form ? [form] : []));
  }

  let detailRequest = 0;
  async function loadDetail() {
    const section = $('detail');
    const name = view.selected;
    if (name === null) {
      section.hidden = true;
      return;
    }
    const request = ++detailRequest;
    view.detailAt = Date.now();
    let detail;
    let failure = null;
    try {
      const response = await fetch(`/api/names/${encodeURIComponent(name)}`);
      detail = await response.json();
      if (!response.ok) failure = detail.error;
    } catch (error) {
      failure = String(error);
    }
    if (request !== detailRequest) return;
    section.hidden = false;
    $('detail-title').textContent = name;
    const { body, info, force } = detailParts();
    body.dataset.drawn = String(Number(body.dataset.drawn ?? 0) + 1);
    if (failure) {
      info.replaceChildren(el('p', { class: 'muted' }, failure));
      showForceForm(force, null);
      return;
    }
    const holders = detail.holders.length
      ? detail.holders.map((holder) =>
          el(
            'li',
            {},
            `${holder.owner || '(no owner)'} — token ${holder.token}${holder.mode ? `, ${holder.mode}` : ''}${holder.permits ? `, ${holder.permits} permit(s)` : ''}${holder.since ? `, since ${new Date(holder.since).toLocaleTimeString()}` : ''}`,
          ),
        )
      : [el('li', { class: 'muted' }, 'nobody')];
    info.replaceChildren(
      el(
        'p',
        {},
        `${detail.kind}${detail.leader ? `: leader ${detail.leader.value}, term ${detail.leader.term}` : ''}${detail.permits ? `: ${detail.permits.used} of ${detail.permits.limit} permits` : ''}`,
      ),
      el('h3', {}, 'Holders'),
      el('ul', {}, ...holders),
      el('h3', {}, 'Waiting'),
      el('p', { id: 'detail-waiters' }, `${detail.waiters} waiting.`),
      queueList(detail),
      el('h3', {}, 'Fencing tokens of the last grants'),
      tokenChart(detail.history.grants),
      el('h3', {}, 'Hold times'),
      holdChart(detail.history.holdTimesMs),
    );
    showForceForm(force, detail);
  }

  function connect() {
    const stream = new EventSource('/api/events');
    stream.addEventListener('open', () => {
      view.streamDown = false;
      banner();
    });
    stream.addEventListener('error', () => {
      view.streamDown = true;
      banner();
    });
    stream.addEventListener('state', (event) => {
      view.state = JSON.parse(event.data);
      view.receivedAt = Date.now();
      view.streamDown = false;
      banner();
      renderNames();
      // The open detail follows the looks too, at most every 2 s.
      if (view.selected !== null && Date.now() - view.detailAt > 2000) loadDetail();
    });
    stream.addEventListener('timeline', (event) => addTimeline(JSON.parse(event.data)));
  }

  async function start() {
    for (const th of $('names').tHead.rows[0].cells) {
      th.addEventListener('click', () => {
        if (view.sortKey === th.dataset.sort) view.sortUp = !view.sortUp;
        else {
          view.sortKey = th.dataset.sort;
          view.sortUp = true;
        }
        renderNames();
      });
    }
    $('filter').addEventListener('input', renderNames);
    followRowClicks();
    try {
      view.config = await (await fetch('/api/config')).json();
      $('backend').textContent =
        `${view.config.backend}${view.config.prefix ? `, names under "${view.config.prefix}"` : ''}`;
      $('note').textContent = view.config.backendNote;
    } catch {
      // the stream's banner says the server is gone; the config comes with the next load
    }
    connect();
    setInterval(renderNames, 1000);
  }

  document.addEventListener('DOMContentLoaded', start);
})();
