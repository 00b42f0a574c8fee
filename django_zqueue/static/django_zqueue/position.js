/* django_zqueue: keeps each [data-zq-position] widget up to date by long-polling its URL
   (the server answers when the job's status or rank changes). No framework. */
(function () {
  "use strict";
  function watch(box) {
    if (box.dataset.zqWatching) return;
    box.dataset.zqWatching = "1";
    var text = box.querySelector("[data-zq-text]"), eta = box.querySelector("[data-zq-eta]");
    function show(p) {
      box.dataset.zqStatus = p.status || "";
      box.dataset.zqAhead = p.ahead === null || p.ahead === undefined ? "" : p.ahead;
      box.dataset.zqVersion = p.version || "";
      text.textContent = p.text || "";
      eta.textContent = p.eta_text || "";
    }
    function poll() {
      var url = box.dataset.zqPosition + "?after=" + encodeURIComponent(box.dataset.zqVersion || "-");
      fetch(url, {credentials: "same-origin", headers: {Accept: "application/json"}})
        .then(function (r) { return r.json().then(function (p) { return [r.status, p]; }); })
        .then(function (got) {
          if (got[0] === 404) { show(got[1]); return; }
          if (got[0] !== 200) { setTimeout(poll, 5000); return; }
          show(got[1]);
          if (got[1].status !== "done" && got[1].status !== "failed") setTimeout(poll, 0);
        })
        .catch(function () { setTimeout(poll, 5000); });
    }
    if (box.dataset.zqStatus !== "done" && box.dataset.zqStatus !== "failed") poll();
  }
  document.querySelectorAll("[data-zq-position]").forEach(watch);
})();
