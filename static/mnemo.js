// When an htmx request fails, say so where it was made: nothing was swapped in, so without this the
// page would look as if the click did nothing. The error pages carry their sentence in
// [data-error-message] (templates/error.html); a failure with no page says what it knows.
(function () {
  "use strict";

  function messageFor(xhr) {
    if (xhr && xhr.responseText) {
      var doc = new DOMParser().parseFromString(xhr.responseText, "text/html");
      var said = doc.querySelector("[data-error-message]");
      if (said && said.textContent.trim()) {
        return said.textContent.trim();
      }
    }
    if (xhr && xhr.status) {
      return "That did not work (the server answered " + xhr.status + "); nothing was changed. Reload the page and try again.";
    }
    return "Mnemo could not be reached, so nothing was changed. Check the connection and try again.";
  }

  function show(elt, text) {
    var anchor = (elt && elt.closest && elt.closest("form")) || elt || document.querySelector("main");
    var box = anchor.previousElementSibling;
    if (!box || !box.classList || !box.classList.contains("request-failed")) {
      box = document.createElement("p");
      box.className = "error request-failed";
      box.setAttribute("role", "alert");
      anchor.parentNode.insertBefore(box, anchor);
    }
    box.textContent = text;
  }

  function clear(elt) {
    var anchor = (elt && elt.closest && elt.closest("form")) || elt;
    var box = anchor && anchor.previousElementSibling;
    if (box && box.classList && box.classList.contains("request-failed")) {
      box.remove();
    }
  }

  document.addEventListener("htmx:responseError", function (event) {
    show(event.detail.elt, messageFor(event.detail.xhr));
  });
  document.addEventListener("htmx:sendError", function (event) {
    show(event.detail.elt, messageFor(null));
  });
  document.addEventListener("htmx:beforeRequest", function (event) {
    clear(event.detail.elt);
  });
})();
