"""The contract of src/attention_scaling/seams.py: each assumption the explorer makes about
Panel, Bokeh and Tornado beyond their public API, checked against the installed libraries, so
that an upgrade that breaks one fails here by name."""

from __future__ import annotations

import warnings

import pytest

from attention_scaling import seams


def test_the_installed_libraries_are_the_checked_minor_versions():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert seams.check_versions() == []


def test_panels_handlers_are_in_bokehs_route_table_and_are_replaced():
    from bokeh.server.urls import per_app_patterns
    from panel.io.server import AutoloadJsHandler, DocHandler, WSHandler
    from tornado import web

    saved = list(per_app_patterns)
    try:
        routes = {route: handler for route, handler, *_ in per_app_patterns}
        if not {DocHandler, WSHandler} <= set(routes.values()):   # already installed
            pytest.skip("this process installed the capped handlers already")
        assert routes["/autoload.js"] is AutoloadJsHandler and "/metadata" in routes

        class Page(DocHandler):
            pass

        class Socket(WSHandler):
            pass

        class Missing(web.RequestHandler):
            pass

        seams.install_handlers(Page, Socket, Missing)
        routes = {route: handler for route, handler, *_ in per_app_patterns}
        assert routes["/ws"] is Socket and routes["/?"] is Page
        assert routes["/autoload.js"] is Missing and routes["/metadata"] is Missing
        seams.install_handlers(Page, Socket, Missing)                # idempotent
        assert len(per_app_patterns) == len(saved)
    finally:
        per_app_patterns[:] = saved
    with pytest.raises(RuntimeError, match="not supported"):
        try:
            per_app_patterns[:] = [p for p in saved if p[0] == "/metadata"]
            seams.install_handlers(Page, Socket, Missing)
        finally:
            per_app_patterns[:] = saved


def test_bokehs_server_keeps_its_open_connections_in_clients():
    from bokeh.application import Application
    from bokeh.server.tornado import BokehTornado

    async def make():
        from tornado.ioloop import IOLoop
        app = BokehTornado({"/": Application()})
        app.initialize(IOLoop.current())          # what a Bokeh Server does when it starts
        return seams.open_connections(app), type(app._clients)

    from conftest import run_in_thread
    count, kind = run_in_thread(make)
    assert count == 0 and kind is set


def test_tornado_marks_a_finished_response():
    import inspect

    from tornado import httputil, web
    conn = type("Conn", (), {"set_close_callback": lambda self, cb: None})()
    request = httputil.HTTPServerRequest(
        connection=conn, start_line=httputil.RequestStartLine("GET", "/", "HTTP/1.1"),
        headers=httputil.HTTPHeaders({"Host": "127.0.0.1"}))
    handler = web.RequestHandler(web.Application(), request)
    assert seams.finished(handler) is False
    assert "self._finished = True" in inspect.getsource(web.RequestHandler.finish)


def test_bokehs_websocket_handler_keeps_its_partial_message_in_receiver():
    import inspect

    from bokeh.protocol.receiver import Receiver
    from bokeh.server.views.ws import WSHandler
    source = inspect.getsource(WSHandler)
    assert "self.receiver = Receiver(protocol)" in source
    assert "await self.receiver.consume(fragment)" in source
    assert "_partial" in inspect.getsource(Receiver)
    handler = WSHandler.__new__(WSHandler)
    handler.receiver = object()
    seams.drop_partial_message(handler)
    assert handler.receiver is None


def test_panels_rendered_page_loses_its_own_head_and_keeps_its_scripts():
    """A served page: the "connecting" head, then Panel's page with its head's own tags taken
    out by the patterns (one doctype, one title, one charset in all) and the bundles' script
    tags found by file name."""
    from conftest import Server, status_of
    srv = Server()
    try:
        body = status_of(srv.url)[2].decode()
    finally:
        srv.stop()
    lower = body.lower()
    assert lower.count("<!doctype html>") == 1 and lower.count("<title>") == 1
    assert lower.count("<meta charset=") == 1 and lower.count("<head>") == 1
    scripts = [m.group(1) for m in seams.SCRIPT_TAG.finditer(body)]
    assert "bokeh" in scripts and "bokeh-widgets" in scripts, scripts


def test_panels_extension_says_whether_it_was_loaded():
    import panel as pn
    assert isinstance(pn.extension._loaded, bool)
    assert seams.panel_extension_loaded() is pn.extension._loaded


def test_a_served_function_that_returns_none_serves_the_document_it_built():
    """`pn.serve(fn)`: a function that puts its own root in `pn.state.curdoc` and returns
    None (seams.add_root) gets that document served as it is, its root and title, with no
    Panel model around the root."""
    import asyncio

    import panel as pn
    from bokeh.models import Div
    from conftest import free_port, run_in_thread
    from test_server import fetch_page, serve_in_process

    def session():
        seams.add_root(pn.state.curdoc, Div(text="built here", name="own-root"), "Own title")

    async def main():
        port = free_port()
        server = serve_in_process(port, session)
        try:
            page = await asyncio.get_running_loop().run_in_executor(None, fetch_page, port)
            [session_] = server.get_sessions("/")
            doc = session_.document
            return page.decode(), doc.title, [(type(r).__name__, r.name) for r in doc.roots]
        finally:
            server.stop()

    page, title, roots = run_in_thread(main)
    assert roots == [("Div", "own-root")]
    assert title == "Own title" and "<title>Own title</title>" in page
