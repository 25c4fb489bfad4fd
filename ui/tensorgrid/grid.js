// The tensor grid (ui/tensorgrid.py): a components-v2 module, no build step.
// The data (normviz/axes/gridview.py) arrives once per server run; hovering, focusing
// or tapping a cell then highlights its statistic group and fills in the formula here,
// in the browser. A pick (click, tap, Enter or Space) goes back as the trigger "pick".
// Streamlit calls this function again whenever the data changes (never tearing the DOM
// down in between): the cells are rebuilt only when `sig` changes.

function num(v) {
  // four significant digits, a real minus sign
  if (v === null || v === undefined) return "–";
  if (!Number.isFinite(v)) return Number.isNaN(v) ? "NaN" : v > 0 ? "∞" : "−∞";
  if (v === 0) return "0";
  const a = Math.abs(v);
  const s = a >= 1e4 || a < 1e-3 ? v.toExponential(3) : String(Number(v.toPrecision(4)));
  return s.replace("-", "−");
}

function epsText(e) {
  // ε as the sidebar writes it: 1e−5, 0
  const p = Math.log10(e);
  return e > 0 && Math.abs(p - Math.round(p)) < 1e-9 ? `1e${Math.round(p)}`.replace("-", "−") : num(e);
}

function axisText(d, a, i) {
  // a tensor's axis letter and 0-based index (B=1), or a matrix's word and 1-based (row 2)
  return d.words ? `${a} ${i + 1}` : `${a}=${i}`;
}

function cellName(d, i) {
  const idx = tensorIndex(d, i);
  return d.axes.map((a, k) => axisText(d, a, idx[k])).join(", ");
}

function groupings(d) {
  // the grid's statistic groupings: the first one's fields sit at the top of the data
  if (!d.group.length) return [];
  const first = { group: d.group, mean: d.mean, var: d.var, m: d.m, name: d.name, noun: d.noun, colour: d.colour };
  return [first, ...(d.more || [])];
}

function groupName(gr, g) {
  // "Its group" for a grid of one method; "BatchNorm, column 2" for one of several
  return gr.name ? `${gr.name}, ${gr.noun} ${g + 1}` : "Its group";
}

function tensorIndex(d, i) {
  const out = new Array(d.size.length);
  for (let k = d.size.length - 1; k >= 0; k--) {
    out[k] = d.start[k] + (i % d.size[k]);
    i = Math.floor(i / d.size[k]);
  }
  return out;
}

function prod(a) {
  return a.reduce((p, v) => p * v, 1);
}

// cell i's numbers in one grouping: its group g, the group's μ, σ² and y (γ = 1, β = 0)
function numbers(d, gr, i) {
  const out = { g: gr.group[i] };
  if (gr.var.length) {
    out.mean = gr.mean[out.g];
    out.var = gr.var[out.g];
    const den = Math.sqrt(out.var + d.eps);
    out.y = out.mean === null ? d.values[i] / den : (d.values[i] - out.mean) / den;
  }
  return out;
}

function describe(d, gs, i) {
  const lines = [];
  const x = d.values.length ? d.values[i] : undefined;
  let head = `Cell ${cellName(d, i)}`;
  if (x !== undefined) head += `: x = ${num(x)}`;
  if (d.text.length && !d.values.length) head += ` (shows ${d.text[i]})`;
  lines.push(head);
  for (const gr of gs) {
    const n = numbers(d, gr, i);
    const who = groupName(gr, n.g);
    if (n.var !== undefined) {
      const mine = gr.group.filter((g) => g === n.g).length;
      const drawn = mine < gr.m ? ` (${mine} drawn)` : "";
      if (n.mean === null) {
        lines.push(`${who}: m = ${gr.m.toLocaleString()} values${drawn}, mean square = ${num(n.var)}`);
        lines.push(`y = x / √(ms + ε) = ${num(x)} / √(${num(n.var)} + ${epsText(d.eps)}) = ${num(n.y)}`);
      } else {
        const mu = n.mean < 0 ? `(${num(n.mean)})` : num(n.mean);
        lines.push(
          `${who}: m = ${gr.m.toLocaleString()} values${drawn}, μ = ${num(n.mean)}, σ² = ${num(n.var)}`
        );
        lines.push(
          `y = (x − μ) / √(σ² + ε) = (${num(x)} − ${mu}) / √(${num(n.var)} + ${epsText(d.eps)}) = ${num(n.y)}`
        );
      }
    } else if (gr.m) {
      lines.push(`${who}: m = ${gr.m.toLocaleString()} values`);
    }
  }
  return lines;
}

function build(root, d) {
  const nRows = prod(d.size.slice(0, d.rowDims));
  const nCols = prod(d.size.slice(d.rowDims));
  const rowAxes = d.axes.slice(0, d.rowDims);
  const colAxes = d.axes.slice(d.rowDims);
  const gs = groupings(d);
  root.innerHTML = "";
  for (const [k, v] of Object.entries(d.colours || {})) root.style.setProperty(`--tg-${k}`, v);
  gs.forEach((gr, k) => gr.colour && root.style.setProperty(`--tg-g${k}`, gr.colour));
  const note = document.createElement("p");
  note.className = "tg-note";
  note.textContent = d.note;
  note.hidden = !d.note;
  const grid = document.createElement("div");
  grid.className = gs.length > 1 ? "tg-grid tg-multi" : "tg-grid";
  grid.setAttribute("role", "grid");
  grid.setAttribute("aria-label", `${d.label}: rows ${rowAxes.join("·")}, columns ${colAxes.join("·")}`);
  grid.setAttribute("aria-rowcount", String(nRows + 1));
  grid.setAttribute("aria-colcount", String(nCols + 1));
  grid.style.setProperty("--cols", String(nCols));
  const cells = new Array(nRows * nCols);
  const head = document.createElement("div");
  head.className = "tg-row tg-head";
  head.setAttribute("role", "row");
  const corner = document.createElement("div");
  corner.className = "tg-corner";
  corner.setAttribute("role", "columnheader");
  corner.textContent = `${rowAxes.join("·")} \\ ${colAxes.join("·")}`;
  head.appendChild(corner);
  const colHeads = [];
  for (let c = 0; c < nCols; c++) {
    const h = document.createElement("div");
    h.className = "tg-ch";
    h.setAttribute("role", "columnheader");
    const idx = tensorIndex(d, c).slice(d.rowDims);
    const label = colAxes.map((a, k) => (d.words ? axisText(d, a, idx[k]) : `${a}${idx[k]}`)).join(" ");
    h.setAttribute("aria-label", label);
    h.dataset.label = label;
    colHeads.push(h);
    head.appendChild(h);
  }
  grid.appendChild(head);
  const rowHeads = [];
  for (let r = 0; r < nRows; r++) {
    const row = document.createElement("div");
    row.className = "tg-row";
    row.setAttribute("role", "row");
    const rh = document.createElement("div");
    rh.className = "tg-rh";
    rh.setAttribute("role", "rowheader");
    const idx = tensorIndex(d, r * nCols).slice(0, d.rowDims);
    const label = rowAxes.map((a, k) => (d.words ? axisText(d, a, idx[k]) : `${a}${idx[k]}`)).join(" ");
    rh.setAttribute("aria-label", label);
    rh.dataset.label = label;
    rowHeads.push(rh);
    row.appendChild(rh);
    for (let c = 0; c < nCols; c++) {
      const i = r * nCols + c;
      const cell = document.createElement("div");
      cell.className = "tg-cell";
      cell.setAttribute("role", "gridcell");
      cell.dataset.i = String(i);
      cell.tabIndex = -1;
      const fill = d.palette[d.fill[i]];
      cell.style.background = fill;
      cell.style.color = d.ink[d.fill[i]];
      if (d.text.length) {
        const label = document.createElement("span");  // above the fading veil: readable
        label.textContent = d.text[i];
        cell.appendChild(label);
      }
      const group = gs
        .map((gr) => `, ${gr.name ? gr.name + " " : ""}${gr.noun} ${gr.group[i] + 1} of m = ${gr.m}`)
        .join("");
      const x = d.values.length ? `, x = ${num(d.values[i])}` : "";
      const shown = d.text.length && !d.values.length ? `, ${d.text[i]}` : "";
      cell.setAttribute("aria-label", `${cellName(d, i)}${x}${shown}${group}`);
      cells[i] = cell;
      row.appendChild(cell);
    }
    grid.appendChild(row);
  }
  const info = document.createElement("div");
  info.className = "tg-info";
  info.setAttribute("aria-live", "polite");
  const legend = document.createElement("p");
  legend.className = "tg-legend";
  legend.textContent = d.legend;
  legend.hidden = !d.legend;
  root.append(note, grid, info, legend);
  const groups = gs.map((gr) => {
    const by = new Map();
    gr.group.forEach((g, i) => {
      if (!by.has(g)) by.set(g, []);
      by.get(g).push(cells[i]);
    });
    return by;
  });
  return { grid, cells, info, nRows, nCols, colHeads, rowHeads, gs, groups, lit: [] };
}

function layoutCells(st) {
  // cells fill the width; rows as tall as wide, within limits; labels thinned to fit
  const w = st.grid.clientWidth;
  if (!w) return;
  const rem = parseFloat(getComputedStyle(document.documentElement).fontSize) || 16;
  const labelW = st.rowHeads.length ? st.rowHeads[0].getBoundingClientRect().width : 0;
  const colW = Math.max(1, (w - labelW) / st.nCols);
  // all rows together at most --tg-rows-rem (inherited from the page: ui/css.py) or 40 rem
  const rows = parseFloat(getComputedStyle(st.grid).getPropertyValue("--tg-rows-rem")) || 40;
  const h = Math.max(6, Math.min(colW, 1.75 * rem, Math.max(6, (rows * rem) / st.nRows)));
  st.grid.style.setProperty("--h", `${h}px`);
  const fit = (px, need) => Math.max(1, Math.ceil(need / px));
  const need = (c) => 0.6 * rem * c.dataset.label.length + 4;  // a label's width, generously
  const colStep = fit(colW, Math.max(...st.colHeads.map(need)));
  // a label starts at its column and runs right over the unlabelled ones: one near the
  // right edge is shown only if the columns left to it hold it (else it would stick out)
  const shown = (c, k) => k % colStep === 0 && (k === 0 || (st.nCols - k) * colW >= need(c));
  st.colHeads.forEach((c, k) => (c.textContent = shown(c, k) ? c.dataset.label : ""));
  const rowStep = fit(h, 0.95 * rem);
  st.rowHeads.forEach((r, k) => (r.textContent = k % rowStep ? "" : r.dataset.label));
  st.grid.classList.toggle("tg-small", h < 0.9 * rem);
}

function light(st, d, i) {
  // highlight cell i's group (or nothing), show its numbers
  // (in every grouping: a grid of two methods lights a column and a row, each its own ring)
  for (const c of st.lit) c.classList.remove("tg-in", "tg-in-0", "tg-in-1");
  st.lit = [];
  const on = i !== null && i !== undefined && st.gs.length > 0;
  st.grid.classList.toggle("tg-lit", on);
  if (on) {
    st.gs.forEach((gr, k) => {
      for (const c of st.groups[k].get(gr.group[i]) || []) {
        c.classList.add("tg-in", `tg-in-${k}`);
        st.lit.push(c);
      }
    });
  }
  st.info.replaceChildren();
  if (i === null || i === undefined) return;
  for (const line of describe(d, st.gs, i)) {
    const p = document.createElement("p");
    p.textContent = line;
    st.info.appendChild(p);
  }
  st.shown = i;
}

function mark(st, d) {
  // the selection and the marks, from the data and this browser's picks
  const sel = st.selected;
  st.cells.forEach((c, i) => {
    const picked = d.pick === "one" ? i === sel : st.picked.has(i);
    c.classList.toggle("tg-sel", d.pick === "one" && i === sel);
    c.classList.toggle("tg-picked", d.pick !== "one" && picked);
    c.setAttribute("aria-selected", String(picked));
  });
  for (const [kind, list] of Object.entries(d.marks || {}))
    for (const i of list) if (st.cells[i]) st.cells[i].classList.add(`tg-${kind}`);
}

function setFocus(st, i, move) {
  if (st.focus !== undefined && st.cells[st.focus]) st.cells[st.focus].tabIndex = -1;
  st.focus = i;
  st.cells[i].tabIndex = 0;
  if (move) st.cells[i].focus({ preventScroll: false });
}

function pick(root, i) {
  const st = root._tg;
  const d = st.data;
  if (d.pick === "none") return;
  if (d.pick === "one") {
    st.selected = i;
    mark(st, d);
    light(st, d, i);
    st.send("pick", { cell: tensorIndex(d, i) });
  } else {
    if (st.picked.has(i)) st.picked.delete(i);
    else st.picked.add(i);
    mark(st, d);
    st.send("pick", { cells: [...st.picked].sort((a, b) => a - b) });
  }
}

function cellOf(ev) {
  const c = ev.target.closest ? ev.target.closest(".tg-cell") : null;
  return c ? Number(c.dataset.i) : null;
}

function listen(root) {
  let down = null;
  root.addEventListener("pointerover", (ev) => {
    const i = cellOf(ev);
    if (i !== null) light(root._tg, root._tg.data, i);
  });
  root.addEventListener("pointerleave", () => {
    const st = root._tg;
    light(st, st.data, st.resting());
  });
  root.addEventListener("pointerdown", (ev) => {
    down = { i: cellOf(ev), id: ev.pointerId };
  });
  root.addEventListener("pointercancel", () => (down = null));
  root.addEventListener("pointerup", (ev) => {
    const i = cellOf(ev);
    const was = down;
    down = null;
    if (i === null || !was || was.i !== i || was.id !== ev.pointerId) return;
    if (ev.pointerType === "mouse" && ev.button !== 0) return;
    setFocus(root._tg, i, false);
    pick(root, i);
  });
  root.addEventListener("focusin", (ev) => {
    const i = cellOf(ev);
    if (i !== null) light(root._tg, root._tg.data, i);
  });
  root.addEventListener("keydown", (ev) => {
    const st = root._tg;
    const i = cellOf(ev);
    if (i === null) return;
    const r = Math.floor(i / st.nCols);
    const c = i % st.nCols;
    const moves = {
      ArrowLeft: [r, c - 1],
      ArrowRight: [r, c + 1],
      ArrowUp: [r - 1, c],
      ArrowDown: [r + 1, c],
      Home: [r, 0],
      End: [r, st.nCols - 1],
    };
    if (ev.key in moves) {
      const [r2, c2] = moves[ev.key];
      if (r2 >= 0 && r2 < st.nRows && c2 >= 0 && c2 < st.nCols) setFocus(st, r2 * st.nCols + c2, true);
      ev.preventDefault();
    } else if (ev.key === "Enter" || ev.key === " ") {
      ev.preventDefault();
      pick(root, i);
    }
  });
}

export default function (component) {
  const { data, parentElement, setTriggerValue } = component;
  if (!data) return;
  let root = parentElement.querySelector(".tg");
  if (!root) {
    root = document.createElement("div");
    root.className = "tg";
    parentElement.appendChild(root);
    listen(root);
    root._tg = null;
    root._ro = new ResizeObserver(() => root._tg && layoutCells(root._tg));
    root._ro.observe(root);
  }
  const prev = root._tg;
  const keepFocus = prev && root.contains(document.activeElement) ? prev.focus : undefined;
  let st = prev;
  if (!prev || prev.data.sig !== data.sig) {
    st = build(root, data);
    root._tg = st;
    layoutCells(st);
  }
  st.data = data;
  st.send = setTriggerValue;
  st.selected = data.selected === null || data.selected === undefined ? null : data.selected;
  st.picked = new Set(data.picked || []);
  st.resting = () => (st.data.pick === "one" ? st.selected : null);
  mark(st, data);
  const first = st.selected ?? (data.marks && data.marks.marked ? data.marks.marked[0] : 0);
  if (keepFocus !== undefined && st.cells[keepFocus]) setFocus(st, keepFocus, true);
  else setFocus(st, st.cells[first] ? first : 0, false);
  light(st, data, st.resting());
  root.dataset.ready = data.sig + ":" + String(st.selected);
  return () => root._ro && root._ro.disconnect();
}
