"""Faults: the server goes away under an open page, then comes back."""

import pytest

from attention_scaling import core
from conftest import UI_WAIT_MS, Server
from conftest import column, open_app, wait_changed

pytestmark = pytest.mark.browser

BAR = ".as-connection-lost"


def test_killed_server_is_announced_and_the_page_reconnects_to_the_same_view(page):
    """Kill the server mid-session: the page says so at once (no dead charts pretending to be
    live) and keeps polling; once a server answers again on the same address, the page
    reloads itself into the same view (every control is in the URL) and works again.
    Over 20 s: two servers started on the same address, and the page's polling until it
    reloads."""
    srv = Server()
    port = srv.url
    srv.url += "?d_k=256&scaled=0&temperature=2.5&seed=7"
    try:
        open_app(page, srv)
        page.wait_for_function("() => window.location.search.includes('seed=7')", timeout=UI_WAIT_MS)
        assert page.locator(BAR).count() == 0
        srv.stop()                                            # the server dies mid-session
        bar = page.locator(BAR)
        bar.wait_for(timeout=UI_WAIT_MS)
        text = bar.inner_text()
        assert "Lost the connection to the server" in text and "Reload now" in text
        assert "NaN" not in text and "undefined" not in text
        # the controls are covered while nothing can answer them
        assert page.locator(".as-connection-veil").is_visible()
        page.wait_for_function("(s) => document.querySelector(s).innerText.includes('Trying again')",
                               arg=BAR, timeout=UI_WAIT_MS)   # it keeps trying, and says so
        srv = Server(port=int(port.rsplit(":", 1)[1].strip("/")))   # back on the same address
        page.wait_for_function(
            "() => window.Bokeh && Bokeh.documents.length > 0 && "
            "Bokeh.documents[0].get_model_by_name('scaled-weights-source') !== null && "
            "document.querySelector('.as-connection-lost') === null", timeout=60_000)
        page.wait_for_function("() => (window.__col('unscaled-weights-source', 'weight') || [])"
                               ".length > 0", timeout=UI_WAIT_MS)
        st = core.compute_state(256, 2.5, 7)                  # the same view as before
        assert column(page, "unscaled-weights-source", "weight") == pytest.approx(
            st.unscaled.probs.tolist(), abs=1e-12)
        before = column(page, "scaled-weights-source", "weight")
        page.locator(".noUi-handle").first.focus()
        page.keyboard.press("ArrowRight")                     # and it is live again
        wait_changed(page, "scaled-weights-source", "weight", before)
        nxt = core.D_K_VALUES[core.D_K_VALUES.index(256) + 1]
        assert column(page, "scaled-weights-source", "weight") == pytest.approx(
            core.compute_state(nxt, 2.5, 7).scaled.probs.tolist(), abs=1e-12)
    finally:
        srv.stop()
