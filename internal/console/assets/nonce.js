// xterm.js builds its stylesheets at run time; the page's CSP admits
// <style> elements only with this page's nonce, so every one created
// gets it.
(function () {
  const meta = document.querySelector('meta[name="csp-nonce"]');
  const nonce = meta ? meta.content : "";
  const create = Document.prototype.createElement;
  Document.prototype.createElement = function (tag, opts) {
    const el = create.call(this, tag, opts);
    if (nonce && String(tag).toLowerCase() === "style") el.nonce = nonce;
    return el;
  };
})();
