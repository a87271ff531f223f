// A workspace tab not loaded yet (joining many tabs opens the rest lazily) or without a URL: shows
// its title, and loads its page the first time it is shown.
const params = new URLSearchParams(location.search);
const title = params.get("title") ?? "";
const url = params.get("url") ?? "";
// Never empty: a browser shows an untitled page's own URL (this placeholder's, with its query) as
// the tab's title. The page's URL stands in until it loads (docs/extension.md: a placeholder's
// title is never published, whatever it shows).
document.title = title || url || "(untitled)";

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
