// Console behaviour: click-to-reveal for blurred text and single-key shortcuts.
(function () {
  "use strict";

  function toggle(el) { el.classList.toggle("revealed"); }

  document.addEventListener("click", function (ev) {
    var target = ev.target.closest ? ev.target.closest(".toxic") : null;
    if (target) { toggle(target); }
  });

  function typing(el) {
    return el && (el.tagName === "INPUT" || el.tagName === "TEXTAREA" || el.tagName === "SELECT");
  }

  document.addEventListener("keydown", function (ev) {
    if (ev.ctrlKey || ev.metaKey || ev.altKey) { return; }
    if (typing(document.activeElement)) {
      if (ev.key === "Escape") { document.activeElement.blur(); }
      return;
    }
    var key = ev.key.toLowerCase();
    if (key === "v") {
      var text = document.getElementById("message-text");
      if (text) { toggle(text); ev.preventDefault(); }
      return;
    }
    var button = document.querySelector('button[data-key="' + key + '"]');
    if (button) {
      var reason = document.getElementById("reason");
      if (reason && !reason.value.trim()) {
        reason.focus();
        reason.setAttribute("placeholder", "A reason is needed before \u201c" + button.textContent.trim() + "\u201d");
      } else {
        button.form.requestSubmit(button);
      }
      ev.preventDefault();
      return;
    }
    var form = document.querySelector('form[data-shortcut-form="' + key + '"]');
    if (form) { form.requestSubmit(); ev.preventDefault(); }
  });
}());
