/* django_zqueue admin: select every row of a page; refresh the figures in place.
   Every data-zq-refresh seconds the page is fetched again and each [data-zq-live] region
   is replaced by its new content. Paused while the tab is hidden, and while a row is
   selected for an action (nothing the operator chose is swept away). */
(function () {
  "use strict";
  /* the header checkbox selects (or clears) every job of the page */
  document.addEventListener("change", function (e) {
    var all = e.target;
    if (!all.matches || !all.matches("[data-zq-select-all]")) return;
    all.form.querySelectorAll("input[name=tags]").forEach(function (box) {
      box.checked = all.checked;
    });
  });
  var main = document.querySelector("[data-zq-refresh]");
  if (!main || !window.fetch || !window.DOMParser) return;
  var period = Math.max(1, Number(main.dataset.zqRefresh) || 5) * 1000;
  var timer = null, busy = false;
  function selecting() {
    return document.querySelector("input[name=tags]:checked, input[data-zq-select-all]:checked");
  }
  function schedule() {
    if (timer === null && !document.hidden) timer = setTimeout(refresh, period);
  }
  function refresh() {
    timer = null;
    if (document.hidden) return;
    if (busy || selecting()) { schedule(); return; }
    busy = true;
    fetch(location.href, {credentials: "same-origin", headers: {"X-ZQueue-Refresh": "1"}})
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html");
        document.querySelectorAll("[data-zq-live]").forEach(function (el) {
          var now = fresh.querySelector('[data-zq-live="' + el.dataset.zqLive + '"]');
          if (now && now.innerHTML !== el.innerHTML) el.innerHTML = now.innerHTML;
        });
        main.dataset.zqRefreshes = String(Number(main.dataset.zqRefreshes || 0) + 1);
      })
      .catch(function () { /* Redis or the network is down: try again next period */ })
      .then(function () { busy = false; schedule(); });
  }
  document.addEventListener("visibilitychange", function () {
    if (document.hidden) { clearTimeout(timer); timer = null; } else { refresh(); }
  });
  schedule();
})();
