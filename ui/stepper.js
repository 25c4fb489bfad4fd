// The step-through player (ui/stepper.py): plays, pauses and steps through frames shipped
// once (normviz.frames.Frames.data()), entirely in the browser. It tells Python only where
// the student stopped: setStateValue("step", k) after a pause, a step or a scrub, never
// while playing. The live region's words are Frames.text(k)'s: "label: name value; ...".

const SVG = "http://www.w3.org/2000/svg";
const W = 640; // the drawing's own units; it scales to its container
const PANEL_H = 150;
const PAD = { l: 56, r: 12, t: 22, b: 30 };

function el(tag, attrs = {}, text = "") {
  const node = tag.startsWith("svg:")
    ? document.createElementNS(SVG, tag.slice(4))
    : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text) node.textContent = text;
  return node;
}

function frameText(d, i) {
  const numbers = d.columns.map((c) => `${c.name} ${c.text[i]}`).join("; ");
  return numbers ? `${d.labels[i]}: ${numbers}` : d.labels[i];
}

function tick(v) {
  return Math.abs(v) >= 1e4 || (v !== 0 && Math.abs(v) < 1e-3) ? v.toExponential(1) : +v.toPrecision(3) + "";
}

// ---- the line drawing: panels of series, each drawn up to frame i ------------------------

function linesDrawing(d) {
  const n = d.labels.length;
  const panels = Math.max(1, d.panels.length);
  const H = panels * PANEL_H + PAD.b;
  const svg = el("svg:svg", { viewBox: `0 0 ${W} ${H}`, class: "nv-svg", "aria-hidden": "true" });
  const x = (k) => PAD.l + ((k - 0.5) / n) * (W - PAD.l - PAD.r);
  const layers = [];
  for (let p = 0; p < panels; p++) {
    const top = p * PANEL_H + PAD.t;
    const h = PANEL_H - PAD.t - 8;
    const vals = d.lines.filter((s) => s.panel === p).flatMap((s) => s.values).filter((v) => v !== null);
    let lo = Math.min(...vals), hi = Math.max(...vals);
    if (!isFinite(lo)) { lo = 0; hi = 1; }
    if (hi === lo) { hi += 0.5; lo -= 0.5; }
    const m = (hi - lo) * 0.06; lo -= m; hi += m;
    const y = (v) => top + h - ((v - lo) / (hi - lo)) * h;
    svg.append(el("svg:text", { x: PAD.l, y: top - 6, class: "nv-ptitle" }, d.panels[p] || ""));
    svg.append(el("svg:rect", { x: PAD.l, y: top, width: W - PAD.l - PAD.r, height: h, class: "nv-frame" }));
    for (const v of [lo + m, hi - m]) {
      svg.append(el("svg:text", { x: PAD.l - 4, y: y(v) + 4, class: "nv-tick", "text-anchor": "end" }, tick(v)));
    }
    const series = d.lines
      .map((s, j) => ({ s, j }))
      .filter(({ s }) => s.panel === p)
      .map(({ s }) => {
        const path = el("svg:path", {
          class: s.dots ? "nv-dots" : "nv-line",
          stroke: s.colour,
          "stroke-dasharray": s.dash ? "6 4" : "none",
        });
        svg.append(path);
        const ring = s.whole ? null : el("svg:circle", { r: 6, class: "nv-ring" });
        if (ring) svg.append(ring);
        return { s, path, ring };
      });
    layers.push({ series, x, y });
  }
  const cursor = el("svg:line", { y1: PAD.t, y2: panels * PANEL_H - 8, class: "nv-cursor" });
  svg.append(cursor);
  svg.append(el("svg:text", { x: W / 2, y: H - 6, class: "nv-tick", "text-anchor": "middle" }, d.x_title));
  const draw = (i) => {
    for (const { series, x, y } of layers) {
      for (const { s, path, ring } of series) {
        const upto = s.whole ? n : i + 1;
        let dPath = "";
        let pen = false;
        for (let k = 0; k < upto; k++) {
          const v = s.values[k];
          if (v === null) { pen = false; continue; }
          const px = x(k + 1).toFixed(1), py = y(v).toFixed(1);
          dPath += s.dots ? `M${px} ${py}h0` : `${pen ? "L" : "M"}${px} ${py}`;
          pen = true;
        }
        path.setAttribute("d", dPath);
        if (ring) {
          const v = s.values[i];
          ring.setAttribute("visibility", v === null ? "hidden" : "visible");
          if (v !== null) { ring.setAttribute("cx", x(i + 1)); ring.setAttribute("cy", y(v)); }
        }
      }
    }
    const cx = layers[0].x(i + 1);
    cursor.setAttribute("x1", cx);
    cursor.setAttribute("x2", cx);
  };
  return { node: svg, draw };
}

// ---- the matrix drawing: one small table per frame ----------------------------------------

function gridDrawing(d) {
  const table = el("table", { class: "nv-grid", "aria-hidden": "true" });
  const draw = (i) => {
    const g = d.grids[i];
    const marked = new Set(g.marked.map(([r, c]) => `${r},${c}`));
    const done = new Set(g.done.map(([r, c]) => `${r},${c}`));
    table.replaceChildren(
      ...g.cells.map((row, r) => {
        const tr = el("tr");
        row.forEach((text, c) => {
          const cls = marked.has(`${r},${c}`) ? "nv-mark" : done.has(`${r},${c}`) ? "nv-done" : "";
          tr.append(el("td", { class: cls }, text));
        });
        return tr;
      }),
    );
  };
  return { node: table, draw };
}

// ---- the player ---------------------------------------------------------------------------

// Streamlit calls this function again on every server run that changes `data`, with the
// same parentElement, and calls the returned cleanup only at unmount. A run that sends the
// same frames (the fragment's rerun after a stop reached it) keeps the player as it is,
// playing or not; only a start the student did not send (a new link) moves it.
export default function (component) {
  const { data, setStateValue, parentElement } = component;
  const host = parentElement.querySelector(".nv-stepper");
  const sig = JSON.stringify([data.frames, !!data.presenter, data.delay]);
  const kept = host._nv;
  if (kept && kept.sig === sig) {
    kept.send = setStateValue;
    kept.follow(data.start);
    return kept.cleanup;
  }
  if (kept) kept.cleanup(); // other frames: the old player's timers stop with it
  const d = data.frames;
  const n = d.labels.length;
  const api = { sig, send: setStateValue };
  host._nv = api;
  const drawing = d.grids.length ? gridDrawing(d) : linesDrawing(d);
  // a stop from the server, 1-based and clamped to the frames (0 or none: the last one)
  const frameOf = (start) => Math.max(1, Math.min(n, start || n));
  let i = frameOf(data.start) - 1;
  let sent = data.start;
  let timer = null;
  let report = null;

  const label = el("p", { class: "nv-label" });
  const numbers = el("dl", { class: "nv-numbers" });
  const live = el("div", { class: "nv-live", role: "status", "aria-live": "polite" });
  const prev = el("button", { type: "button", class: "nv-prev", "aria-label": "Previous step (left arrow)" }, "◀");
  const play = el("button", { type: "button", class: "nv-play", "aria-label": "Play (space)" }, "▶ Play");
  const next = el("button", { type: "button", class: "nv-next", "aria-label": "Next step (right arrow)" }, "▶");
  const scrub = el("input", {
    type: "range", min: 1, max: n, step: 1, value: i + 1, class: "nv-scrub",
    "aria-label": `Step, 1 to ${n}`,
  });
  const bar = el("div", { class: "nv-bar" });
  bar.append(prev, play, next, scrub);
  const region = el("div", {
    class: "nv-player" + (data.presenter ? " nv-presenter" : ""), role: "group", tabindex: "0",
    "aria-label": `${d.title}: step-through player. Space plays or pauses; left and right arrows step.`,
    "aria-roledescription": "step-through player",
  });
  const summary = el("p", { class: "nv-summary" }, d.summary);
  region.append(el("p", { class: "nv-title" }, d.title), drawing.node, label, numbers, bar, live, summary);
  host.replaceChildren(region);

  const show = (announce) => {
    drawing.draw(i);
    label.textContent = d.labels[i];
    numbers.replaceChildren(...d.columns.flatMap((c) => [el("dt", {}, c.name), el("dd", {}, c.text[i])]));
    scrub.value = i + 1;
    scrub.setAttribute("aria-valuetext", d.labels[i]);
    prev.disabled = i === 0;
    next.disabled = i === n - 1;
    region.dataset.frame = i + 1;
    if (announce) live.textContent = frameText(d, i);
  };
  const stopped = () => { // only where the student stops reaches the server (a short pause)
    clearTimeout(report);
    report = setTimeout(() => {
      if (timer === null && sent !== i + 1) { sent = i + 1; api.send("step", i + 1); }
    }, data.delay);
  };
  const pause = () => {
    if (timer === null) return;
    clearInterval(timer);
    timer = null;
    play.textContent = "▶ Play";
    play.setAttribute("aria-label", "Play (space)");
    region.dataset.playing = "0";
    show(true);
    stopped();
  };
  const start = () => {
    if (i === n - 1) i = 0; // at the end: play from the start
    const every = Math.max(40, Math.min(800, 6000 / n)); // a whole run takes about 6 s
    const stride = Math.max(1, Math.round((every * n) / 6000));
    clearTimeout(report);
    timer = setInterval(() => {
      i = Math.min(n - 1, i + stride);
      show(false);
      if (i === n - 1) pause();
    }, every);
    play.textContent = "❚❚ Pause";
    play.setAttribute("aria-label", "Pause (space)");
    region.dataset.playing = "1";
    show(false);
  };
  const toggle = () => (timer === null ? start() : pause());
  const go = (k) => {
    pause();
    i = Math.max(0, Math.min(n - 1, k));
    show(true);
    stopped();
  };

  play.addEventListener("click", toggle);
  prev.addEventListener("click", () => go(i - 1));
  next.addEventListener("click", () => go(i + 1));
  scrub.addEventListener("input", () => go(Number(scrub.value) - 1));
  region.addEventListener("keydown", (e) => {
    if (e.key === " " || e.key === "Spacebar") {
      e.preventDefault(); // not also a click on a focused button
      toggle();
    } else if ((e.key === "ArrowLeft" || e.key === "ArrowRight") && e.target !== scrub) {
      e.preventDefault();
      go(i + (e.key === "ArrowRight" ? 1 : -1));
    }
  });
  region.addEventListener("keyup", (e) => { if (e.key === " ") e.preventDefault(); });
  api.follow = (start) => {
    region.dataset.serverStart = start; // the stop the server's last run sent (tests read it)
    const k = frameOf(start);
    if (start === sent || timer !== null || k === i + 1) return; // the student's own stop
    sent = start;
    i = k - 1;
    show(true);
  };
  api.cleanup = () => { clearInterval(timer); timer = null; clearTimeout(report); };
  region.dataset.serverStart = data.start;
  show(true);
  return api.cleanup;
}
