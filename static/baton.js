// Baton's own page behaviour, in a file of its own: the Content-Security-Policy runs
// no inline script and no eval, so nothing of this kind may live in the templates.
"use strict";

// The inbox's list refreshes itself (hx-trigger="every ...s" on #task-list). A refresh
// would throw away what the reviewer is doing in it, so it is skipped while focus is
// inside the list or a row is selected for bulk approval; the next one tries again.
document.addEventListener("htmx:beforeRequest", function (event) {
  var list = event.detail.elt;
  if (list.id === "task-list" && list.querySelector(":focus, input:checked")) {
    event.preventDefault();
  }
});

// The inbox's filters are folded (a <details>) so that a phone shows the first task on
// its first screen; a wider screen has the room, so they are shown open there.
document.addEventListener("DOMContentLoaded", function () {
  if (window.matchMedia("(min-width: 40.01rem)").matches) {
    document.querySelectorAll("details.filters-fold").forEach(function (fold) {
      fold.open = true;
    });
  }
});
