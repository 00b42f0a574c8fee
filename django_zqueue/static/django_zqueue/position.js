/* django_zqueue: keeps each [data-zq-position] widget up to date. It follows the job's
   server-sent events (data-zq-stream: its position, the text it streams, its end),
   resuming after the last chunk it got when the connection comes back; where the
   browser has no EventSource, it long-polls the position (data-zq-position). No framework. */
(function () {
  "use strict";
  // the statuses after which nothing changes (django_zqueue.tasks.watch.FINAL)
  var FINAL = ["done", "failed", "cancelled", "expired", "gone"];
  function watch(box) {
    if (box.dataset.zqWatching) return;
    box.dataset.zqWatching = "1";
    var text = box.querySelector("[data-zq-text]"), eta = box.querySelector("[data-zq-eta]");
    var bar = box.querySelector("[data-zq-progress]"), out = box.querySelector("[data-zq-output]");
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
    function listen() {
      // the first connection resumes after what the page already shows; a reconnect
      // sends the id of the last chunk received (Last-Event-ID) by itself
      var after = box.dataset.zqAfter || "0";
      var events = new EventSource(box.dataset.zqStream + "?after=" + encodeURIComponent(after));
      function data(e) { return JSON.parse(e.data); }
      events.addEventListener("position", function (e) { show(data(e)); });
      events.addEventListener("chunk", function (e) {
        if (out) { out.hidden = false; out.textContent += data(e).text; }
        box.dataset.zqAfter = e.lastEventId;
        box.dataset.zqChunks = String(Number(box.dataset.zqChunks || "0") + 1);
      });
      events.addEventListener("end", function (e) { show(data(e)); events.close(); });
      events.addEventListener("error", function () {
        // a 404 (token no longer valid) closes the source: say so once
        if (events.readyState === EventSource.CLOSED) poll();
      });
    }
    if (over(box.dataset.zqStatus)) return;
    if (box.dataset.zqStream && window.EventSource) listen(); else poll();
  }
  document.querySelectorAll("[data-zq-position]").forEach(watch);
})();
