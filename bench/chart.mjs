// Line charts as plain SVG text: log-scaled axes (contenders and rates span decades), one coloured
// line per series with a legend. No chart library: the output is a few hundred bytes of markup a
// browser and GitHub render as they are, and the benchmark needs no dependency to write it.

const WIDTH = 860;
const HEIGHT = 420;
/** The legend sits in the right margin: room for names of about 45 characters. */
const MARGIN = { left: 70, right: 360, top: 40, bottom: 50 };
const COLOURS = [
  '#1f77b4',
  '#ff7f0e',
  '#2ca02c',
  '#d62728',
  '#9467bd',
  '#8c564b',
  '#e377c2',
  '#7f7f7f',
  '#17becf',
  '#bcbd22',
];

const xmlText = (text) =>
  String(text).replace(/[<>&"]/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', '"': '&quot;' })[c]);

/** Powers of ten from below min to above max: the gridlines of a log axis. */
function decades(min, max) {
  const out = [];
  for (let p = Math.floor(Math.log10(min)); p <= Math.ceil(Math.log10(max)); p++) out.push(10 ** p);
  return out;
}

/**
 * An SVG line chart with logarithmic x and y axes. series: [{ name, points: [[x, y], …] }]; points
 * that are not positive finite numbers are left out (a log axis cannot show them).
 */
export function lineChart({ title, xLabel, yLabel, series }) {
  const shown = series
    .map((s) => ({
      ...s,
      points: s.points.filter(([x, y]) => x > 0 && y > 0 && Number.isFinite(x) && Number.isFinite(y)),
    }))
    .filter((s) => s.points.length > 0); // a series with nothing to draw stays out of the legend
  const xs = shown.flatMap((s) => s.points.map(([x]) => x));
  const ys = shown.flatMap((s) => s.points.map(([, y]) => y));
  if (xs.length === 0) throw new Error(`lineChart "${title}": no point to draw`);
  const xTicks = decades(Math.min(...xs), Math.max(...xs));
  const yTicks = decades(Math.min(...ys), Math.max(...ys));
  const [x0, x1] = [Math.log10(xTicks[0]), Math.log10(xTicks.at(-1))];
  const [y0, y1] = [Math.log10(yTicks[0]), Math.log10(yTicks.at(-1))];
  const plotW = WIDTH - MARGIN.left - MARGIN.right;
  const plotH = HEIGHT - MARGIN.top - MARGIN.bottom;
  const px = (x) => MARGIN.left + ((Math.log10(x) - x0) / (x1 - x0 || 1)) * plotW;
  const py = (y) => MARGIN.top + plotH - ((Math.log10(y) - y0) / (y1 - y0 || 1)) * plotH;
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${HEIGHT}" font-family="sans-serif" font-size="12">`,
    `<title>${xmlText(title)}</title>`,
    `<rect width="${WIDTH}" height="${HEIGHT}" fill="white"/>`,
    `<text x="${MARGIN.left}" y="22" font-size="14" font-weight="bold">${xmlText(title)}</text>`,
  ];
  for (const t of xTicks) {
    parts.push(
      `<line x1="${px(t)}" x2="${px(t)}" y1="${MARGIN.top}" y2="${MARGIN.top + plotH}" stroke="#ddd"/>`,
    );
    parts.push(
      `<text x="${px(t)}" y="${MARGIN.top + plotH + 16}" text-anchor="middle">${t.toLocaleString('en')}</text>`,
    );
  }
  for (const t of yTicks) {
    parts.push(
      `<line x1="${MARGIN.left}" x2="${MARGIN.left + plotW}" y1="${py(t)}" y2="${py(t)}" stroke="#ddd"/>`,
    );
    parts.push(
      `<text x="${MARGIN.left - 6}" y="${py(t) + 4}" text-anchor="end">${t.toLocaleString('en')}</text>`,
    );
  }
  parts.push(
    `<text x="${MARGIN.left + plotW / 2}" y="${HEIGHT - 10}" text-anchor="middle">${xmlText(xLabel)} (log)</text>`,
  );
  parts.push(
    `<text transform="translate(16 ${MARGIN.top + plotH / 2}) rotate(-90)" text-anchor="middle">${xmlText(yLabel)} (log)</text>`,
  );
  shown.forEach((s, i) => {
    const colour = COLOURS[i % COLOURS.length];
    const dash = /anchor|ceiling/i.test(s.name) ? ' stroke-dasharray="6 4"' : '';
    const path = s.points.map(([x, y]) => `${px(x).toFixed(1)},${py(y).toFixed(1)}`).join(' ');
    parts.push(`<polyline points="${path}" fill="none" stroke="${colour}" stroke-width="2"${dash}/>`);
    for (const [x, y] of s.points)
      parts.push(`<circle cx="${px(x).toFixed(1)}" cy="${py(y).toFixed(1)}" r="3" fill="${colour}"/>`);
    const ly = MARGIN.top + 10 + i * 18;
    const lx = MARGIN.left + plotW + 14;
    parts.push(
      `<line x1="${lx}" x2="${lx + 22}" y1="${ly}" y2="${ly}" stroke="${colour}" stroke-width="2"${dash}/>`,
    );
    parts.push(`<text x="${lx + 28}" y="${ly + 4}">${xmlText(s.name)}</text>`);
  });
  parts.push('</svg>');
  return `${parts.join('\n')}\n`;
}

/**
 * An SVG bar chart of groups of bars on a linear y axis from 0, e.g. each backend's cases as a
 * ratio to its floor. groups: [{ name, bars: [{ name, value }] }]; a dashed line marks `reference`.
 * A bar above `cap` is drawn to the cap, with its value and an arrow over it, so that one outlier
 * does not flatten the others.
 */
export function barChart({ title, yLabel, groups, reference, cap = Number.POSITIVE_INFINITY }) {
  const values = groups.flatMap((g) => g.bars.map((b) => Math.min(b.value, cap)));
  if (values.length === 0) throw new Error(`barChart "${title}": no bar to draw`);
  const top = Math.ceil(Math.max(...values, reference ?? 0) * 1.1);
  const plotW = WIDTH - MARGIN.left - 20;
  const plotH = HEIGHT - MARGIN.top - MARGIN.bottom - 60; // room below for the bars' names
  const py = (y) => MARGIN.top + plotH - (y / top) * plotH;
  const slot = plotW / groups.length;
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${HEIGHT}" font-family="sans-serif" font-size="11">`,
    `<title>${xmlText(title)}</title>`,
    `<rect width="${WIDTH}" height="${HEIGHT}" fill="white"/>`,
    `<text x="${MARGIN.left}" y="22" font-size="14" font-weight="bold">${xmlText(title)}</text>`,
    `<text transform="translate(16 ${MARGIN.top + plotH / 2}) rotate(-90)" text-anchor="middle">${xmlText(yLabel)}</text>`,
  ];
  for (let t = 0; t <= top; t += Math.max(1, Math.ceil(top / 8))) {
    parts.push(
      `<line x1="${MARGIN.left}" x2="${MARGIN.left + plotW}" y1="${py(t)}" y2="${py(t)}" stroke="#ddd"/>`,
      `<text x="${MARGIN.left - 6}" y="${py(t) + 4}" text-anchor="end">${t}</text>`,
    );
  }
  groups.forEach((group, g) => {
    const x0 = MARGIN.left + g * slot;
    const barW = (slot * 0.8) / group.bars.length;
    group.bars.forEach((bar, i) => {
      const x = x0 + slot * 0.1 + i * barW;
      const colour = COLOURS[i % COLOURS.length];
      const shown = Math.min(bar.value, cap);
      const label = `${bar.value.toFixed(2)}${bar.value > cap ? ' ↑' : ''}`;
      parts.push(
        `<rect x="${x.toFixed(1)}" y="${py(shown).toFixed(1)}" width="${(barW - 2).toFixed(1)}" height="${(py(0) - py(shown)).toFixed(1)}" fill="${colour}"/>`,
        `<text x="${(x + barW / 2).toFixed(1)}" y="${(py(shown) - 4).toFixed(1)}" text-anchor="middle">${label}</text>`,
        `<text transform="translate(${(x + barW / 2).toFixed(1)} ${py(0) + 8}) rotate(35)" font-size="10">${xmlText(bar.name)}</text>`,
      );
    });
    parts.push(
      `<text x="${(x0 + slot / 2).toFixed(1)}" y="${HEIGHT - 8}" text-anchor="middle" font-weight="bold">${xmlText(group.name)}</text>`,
    );
  });
  if (reference !== undefined)
    parts.push(
      `<line x1="${MARGIN.left}" x2="${MARGIN.left + plotW}" y1="${py(reference)}" y2="${py(reference)}" stroke="black" stroke-dasharray="6 4"/>`,
    );
  parts.push('</svg>');
  return `${parts.join('\n')}\n`;
}
