/* django_zqueue admin: select every row of a page; refresh the figures in place.
   Every data-zq-refresh seconds the page is fetched again and each [data-zq-live] region
   is replaced by its new content. Paused while the tab is hidden, and while a row is
   selected for an action (nothing the operator chose is swept away). */
(function () {
  "use strict";
  /* the header checkbox selects (or clears) every job of the page; when the page does
     not show every job of the tab, it offers them all ("select_across") */
  function across(form, offer, on) {
    var bar = form.querySelector("[data-zq-across]");
    if (!bar) return;
    bar.hidden = !offer;
    bar.querySelector("[data-zq-across-input]").value = on ? "1" : "0";
    bar.querySelector("[data-zq-across-page]").hidden = on;
    bar.querySelector("[data-zq-across-all]").hidden = !on;
    form.querySelectorAll("[data-zq-not-across]").forEach(function (b) { b.disabled = on; });
  }
  document.addEventListener("change", function (e) {
    var box = e.target;
    if (!box.matches || !box.form) return;
    if (box.matches("[data-zq-select-all]")) {
      box.form.querySelectorAll("input[name=tags]").forEach(function (b) {
        b.checked = box.checked;
      });
      across(box.form, box.checked, false);
    } else if (box.matches("input[name=tags]") && !box.checked) {
      var all = box.form.querySelector("[data-zq-select-all]");
      if (all) all.checked = false;
      across(box.form, false, false);
    }
  });
  document.addEventListener("click", function (e) {
    var b = e.target;
    if (!b.matches || !b.form) return;
    if (b.matches("[data-zq-across-on]")) across(b.form, true, true);
    if (b.matches("[data-zq-across-off]")) {
      b.form.querySelectorAll("input[name=tags], [data-zq-select-all]").forEach(function (x) {
        x.checked = false;
      });
      across(b.form, false, false);
    }
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
