// Drawn once seen (ui/lazy.py): a placeholder that tells the server when it scrolls into
// view (an IntersectionObserver), or when its button is pressed; the server then reruns
// its fragment, which draws the part in its place.
//
// One trigger at a time, SPACING_MS apart, for the whole page: Streamlit sends the widget
// updates of one macrotask as one batch under one fragment id, so two placeholders seen
// together would rerun only the first one's fragment. A placeholder still in the window
// RETRY_MS after its trigger (a rerun lost among others) sends it again.

const SPACING_MS = 60;
const RETRY_MS = 6000;
const RETRIES = 3;
const line = (window.__nvLazy ??= { queue: [], busy: false });

function pump() {
  if (line.busy || !line.queue.length) return;
  line.busy = true;
  line.queue.shift()();
  setTimeout(() => {
    line.busy = false;
    pump();
  }, SPACING_MS);
}

export default function (component) {
  const { data, parentElement, setTriggerValue } = component;
  if (!data) return;
  let box = parentElement.querySelector(".nv-lazy");
  if (!box) {
    box = document.createElement("div");
    box.className = "nv-lazy";
    box.setAttribute("role", "group");
    const text = document.createElement("p");
    text.className = "nv-lazy-text";
    const go = document.createElement("button");
    go.type = "button";
    go.className = "nv-lazy-go";
    box.append(text, go);
    parentElement.appendChild(box);
  }
  box.style.setProperty("--nv-lazy-h", `${data.height}px`);
  box.setAttribute("aria-label", data.label);
  box.querySelector(".nv-lazy-text").textContent = data.text;
  const go = box.querySelector(".nv-lazy-go");
  go.textContent = data.button;
  let sent = 0;
  let inView = false;
  const send = () => {
    if (!box.isConnected) return;
    sent += 1;
    box.dataset.sent = String(sent);
    setTriggerValue("seen", true);
  };
  const ask = () => {
    line.queue.push(send);
    pump();
  };
  go.onclick = ask;
  const io = new IntersectionObserver((entries) => {
    inView = entries.some((e) => e.isIntersecting);
    if (inView && !sent) ask();
  }, { rootMargin: `${data.margin}px 0px` });
  io.observe(box);
  // still here, in view, RETRY_MS after a trigger: ask again (the part is not drawn yet)
  const again = setInterval(() => {
    if (sent && sent <= RETRIES && inView && box.isConnected) ask();
  }, RETRY_MS);
  return () => {
    io.disconnect();
    clearInterval(again);
  };
}
