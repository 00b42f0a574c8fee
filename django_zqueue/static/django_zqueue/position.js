/* django_zqueue: keeps each [data-zq-position] widget up to date by long-polling its URL
   (the server answers when the job's status or rank changes). No framework. */
(function () {
  "use strict";
  // the statuses after which nothing changes (django_zqueue.tasks.watch.FINAL)
  var FINAL = ["done", "failed", "cancelled", "expired", "gone"];
  function watch(box) {
    if (box.dataset.zqWatching) return;
    box.dataset.zqWatching = "1";
    var text = box.querySelector("[data-zq-text]"), eta = box.querySelector("[data-zq-eta]");
    var bar = box.querySelector("[data-zq-progress]");
    function show(p) {
      box.dataset.zqStatus = p.status || "";
      box.dataset.zqAhead = p.ahead === null || p.ahead === undefined ? "" : p.ahead;
      box.dataset.zqVersion = p.version || "";
      text.textContent = p.text || "";
      eta.textContent = p.eta_text || "";
      if (bar) {
        var known = typeof p.progress === "number";
        bar.hidden = !known;
        if (known) bar.value = p.progress; // the text line says the percentage: no "60% 60%"
      }
    }
    function over(status) { return FINAL.indexOf(status) >= 0; }
    function poll() {
      var url = box.dataset.zqPosition + "?after=" + encodeURIComponent(box.dataset.zqVersion || "-");
      fetch(url, {credentials: "same-origin", headers: {Accept: "application/json"}})
        .then(function (r) { return r.json().then(function (p) { return [r.status, p]; }); })
        .then(function (got) {
          if (got[0] === 404) { show(got[1]); return; }
          if (got[0] !== 200) { setTimeout(poll, 5000); return; }
          show(got[1]);
          if (!over(got[1].status)) setTimeout(poll, 0);
        })
        .catch(function () { setTimeout(poll, 5000); });
    }
    if (!over(box.dataset.zqStatus)) poll();
  }
  document.querySelectorAll("[data-zq-position]").forEach(watch);
})();
