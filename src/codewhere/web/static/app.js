// codewhere serve: "/" focuses the search box; a file view scrolls its marked line into the middle.
document.addEventListener("keydown", (event) => {
  const box = document.getElementById("q");
  if (event.key === "/" && box && document.activeElement !== box && !(document.activeElement instanceof HTMLInputElement)) {
    event.preventDefault();
    box.focus();
    box.select();
  }
});
window.addEventListener("load", () => {
  const id = decodeURIComponent(window.location.hash.slice(1));
  const target = id ? document.getElementById(id) : null;
  if (target) target.scrollIntoView({ block: "center" });
});
