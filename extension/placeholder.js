// A workspace tab not loaded yet (joining many tabs opens the rest lazily) or without a URL: shows
// its title, and loads its page the first time it is shown.
const params = new URLSearchParams(location.search);
const title = params.get("title") ?? "";
const url = params.get("url") ?? "";
document.title = title;

function load() {
  if (/^https?:\/\//i.test(url) && document.visibilityState === "visible") location.replace(url);
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("title").textContent = title || "(untitled)";
  document.getElementById("url").textContent = url;
  document.getElementById("note").textContent = url ? "Loads when you open this tab." : "A workspace tab without a page.";
  load();
});
document.addEventListener("visibilitychange", load);
