// The ready-made first view of a page whose visitor waits in line: the explorer as it opens
// for this address, drawn by BokehJS from the document in #as-first-view-doc (no session, no
// websocket), inert, until the live explorer is drawn; then the connecting notice's script
// (server.CONNECTING_JS) removes it through window.__asDropFirstView.
// A seam with BokehJS (checked against BokehJS 3.9), the one outside helpers.js's AS: this
// is a page script, not a program, so AS is not put before it. It finds the document it drew
// in Bokeh.documents and takes it out of that list: BokehJS offers no public way to find the
// document embed_items made or to remove a document from the page.
(function () {
  var box = document.getElementById('as-first-view');
  var data = document.getElementById('as-first-view-doc');
  if (!box || !data) return;
  var tries = 0;
  function draw() {
    if (!box.isConnected) return;                     // the live explorer came first
    if (!(window.Bokeh && Bokeh.embed && Bokeh.embed.embed_items)) {
      if (++tries < 400) setTimeout(draw, 25);       // the scripts are still loading
      return;
    }
    var d = JSON.parse(data.textContent), docs = {}, roots = {};
    docs['as-first-view'] = d.doc;
    roots[d.root] = 'as-first-view-root';
    Bokeh.embed.embed_items(docs, [{docid: 'as-first-view', roots: roots, root_ids: [d.root]}])
      .then(function () {
        var doc = null;
        for (var i = Bokeh.documents.length - 1; i >= 0; i--) {
          var found = Bokeh.documents[i].get_model_by_id(d.root);
          if (found) { doc = Bokeh.documents[i]; break; }
        }
        window.__asFirstView = doc;
        if (!box.isConnected && doc) window.__asDropFirstView();
        else box.setAttribute('data-drawn', '1');
      })
      .catch(function () { box.remove(); });
  }
  // The live explorer is drawn: the first view's roots go (their views with them) and its
  // document leaves Bokeh.documents, so that the page holds the live document only.
  window.__asDropFirstView = function () {
    var doc = window.__asFirstView;
    if (box.isConnected) box.remove();
    if (!doc) return;
    window.__asFirstView = null;
    var roots = doc.roots().slice();
    for (var k = 0; k < roots.length; k++) doc.remove_root(roots[k]);
    var at = Bokeh.documents.indexOf(doc);
    if (at >= 0) Bokeh.documents.splice(at, 1);
  };
  draw();
})();
