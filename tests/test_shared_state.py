"""No session state is shared: every list, dict, set or writable array a session's Bokeh models
hold is that session's own, so that what one session's browser sends (a stream, a patch, a
rollover into any data source) changes nothing another session shows."""

from __future__ import annotations

import asyncio
import json
import sys
import types
import urllib.error
import urllib.request

import numpy as np
import pytest
from bokeh.document import Document
from bokeh.model import Model
from conftest import Server, run_in_thread

from testkit.bokeh_client import Connection, document

from attention_scaling import core, style
from attention_scaling.page import Explorer
from attention_scaling.state import TABS, ExplorerState

MUTABLE = (list, dict, set, bytearray, np.ndarray)


def _memory(array: np.ndarray) -> int:
    """The id of the object whose memory ``array`` shows (itself, or its views' first base)."""
    while isinstance(array.base, np.ndarray):
        array = array.base
    return id(array if array.base is None else array.base)


def mutables(value, found: dict, where: str) -> None:
    """Every mutable container in ``value`` (recursively, not into other models), by id:
    where it was found, and the container (kept, so that no other object takes its id). A writable array is recorded by the memory it shows (a view of a
    shared array is as shared); a read-only one cannot be changed (Bokeh refuses to patch
    it) and is left out."""
    if isinstance(value, Model):
        return
    if isinstance(value, np.ndarray):
        if value.flags.writeable:
            found.setdefault(_memory(value), (where, value))
        return
    if isinstance(value, MUTABLE):
        found.setdefault(id(value), (where, value))
    if isinstance(value, dict):
        for key, item in value.items():
            mutables(item, found, f"{where}[{key!r}]")
    elif isinstance(value, (list, tuple, set, frozenset)):
        for i, item in enumerate(value):
            mutables(item, found, f"{where}[{i}]")


def held_by_models(doc: Document) -> dict:
    """Every mutable container the models of ``doc`` hold in their properties."""
    found: dict = {}
    for model in doc.models:
        for name, value in model.properties_with_values(include_defaults=True).items():
            mutables(value, found, f"{type(model).__name__}({model.name!r}).{name}")
    return found


def package_globals() -> dict:
    """Every mutable container reachable from a module-level name of the package."""
    found: dict = {}
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] != "attention_scaling" or not isinstance(module, types.ModuleType):
            continue
        for attr, value in vars(module).items():
            if not isinstance(value, (types.ModuleType, type, types.FunctionType)):
                mutables(value, found, f"{name}.{attr}")
    return found


def every_tab_built(train: bool, **values) -> Document:
    """A served session's document: an explorer at ``values`` with every argument tab built
    and drawn (each tab opened once), and with ``train`` a training run done (at the
    heaviest setting it takes minutes outside a server)."""
    explorer = Explorer(ExplorerState(**values))
    doc = Document()
    doc.add_root(explorer.view.root)
    explorer.sync_url(doc)
    for tab in TABS[1:]:      # each builds its own, outside a server
        explorer.state.tab = tab.key
    assert explorer.view.unbuilt() == []
    explorer.state.tab = "draw"
    if train:
        explorer.start_training()
    return doc


@pytest.mark.parametrize("train,values", [(True, {}),
                                          (False, {"keys": 64, "d_k": 4096, "align": 1.0})])
def test_no_two_sessions_hold_the_same_list_dict_or_array(train, values):
    first, second = every_tab_built(train, **values), every_tab_built(train, **values)
    a, b = held_by_models(first), held_by_models(second)
    assert len(a) > 100 and len(b) > 100         # the walk sees the models' containers
    shared = sorted(a[i][0] for i in a.keys() & b.keys())
    assert shared == [], shared
    globals_ = package_globals()
    assert id(style.RULE_COLORS) in globals_    # the walk sees the package's own
    module_level = sorted(f"{a[i][0]} is {globals_[i][0]}" for i in a.keys() & globals_.keys())
    assert module_level == [], module_level


def test_the_walk_finds_a_list_two_sessions_share(monkeypatch):
    """Positive control: a column that is one module-level list in both documents (as the
    bars' keys were) is found, as shared and as the package's."""
    shared = [f"k{i + 1}" for i in range(core.N_KEYS)]
    monkeypatch.setattr(style, "SHARED_PROBE", shared, raising=False)
    docs = []
    for _ in range(2):
        doc = Document()
        explorer = Explorer()
        explorer.charts.scaled_source.data["key"] = shared
        doc.add_root(explorer.view.root)
        docs.append(held_by_models(doc))
    assert id(shared) in docs[0].keys() & docs[1].keys() & package_globals().keys()


async def open_session(url: str) -> Connection:
    """A session of the page at ``url``, as a browser opens it: its page, its websocket, the
    ACK."""
    return await Connection.open(url, timeout=30)


async def pull(connection: Connection, decode: bool = True) -> Document | None:
    """The session's document, as PULL-DOC-REPLY gives it (None unless ``decode``: the
    server has sent it, and this process does not build its models, ~1 CPU-s at the
    heaviest address)."""
    reply = await connection.pull()
    assert reply is not None and reply.msgtype == "PULL-DOC-REPLY", reply
    return document(reply) if decode else None


async def every_tab_pulled(connection: Connection, timeout: float = 120,
                           decode: bool = True) -> Document | None:
    """The session's document with every argument tab: its page says it is shown
    (document_ready, as BokehJS sends it), the server's message that puts in the tabs it then
    builds arrives (new TabPanels: page.Explorer.build_rest; ``timeout``: a hang's guard),
    and the document is pulled (:func:`pull`, ``decode``)."""
    await connection.ready()
    while True:
        message = await connection.receive(timeout)
        assert message is not None
        if message.msgtype == "PATCH-DOC" and '"TabPanel"' in message.content_json:
            return await pull(connection, decode)


def data_sources(doc: Document) -> dict:
    """The document's data sources by name (every one is named), their columns as lists."""
    from bokeh.models import ColumnDataSource
    sources = [m for m in doc.models if isinstance(m, ColumnDataSource)]
    assert all(s.name for s in sources), [s for s in sources if not s.name]
    assert len({s.name for s in sources}) == len(sources)
    return {s.name: {k: np.asarray(v).tolist() for k, v in s.data.items()} for s in sources}


ARGUMENT_SOURCES = {"saturation-curves-source", "saturation-draw-source", "logit-histogram-source",
                    "logit-std-source", "logit-width-source", "head-budget-source",
                    "training-source", "training-lr-sweep-source", "gradient-spread-source",
                    "gradient-this-draw-source"}


def test_streams_and_patches_into_every_source_reach_no_other_session(tmp_path):
    """One session patches, streams and streams with rollover every column of every data
    source of its document, every tab built; after each, a session opened anew gets the
    explorer as a session opened before it got it. (The stream is the issue's: a number into
    every column, the keys' labels included.) Over 20 s: a
    session opened anew, every tab built, after each of dozens of changes."""
    srv = Server("--stats", log=tmp_path / "server.log")
    every_tab = srv.url + "?tab=saturation"

    async def newcomer(url, every=True):
        connection = await open_session(url)
        doc = await (every_tab_pulled if every else pull)(connection)
        connection.close()
        return data_sources(doc)

    async def attack():
        connection = await open_session(every_tab)
        doc = await every_tab_pulled(connection)
        before = data_sources(doc)
        events = []
        doc.on_change(events.append)
        answers, newcomers = [], []
        sources = [m for m in doc.models if getattr(m, "name", None) in before]
        for action in ("patch", "stream", "rollover"):
            for source in sources:
                events.clear()
                columns = {k: np.asarray(v).tolist() for k, v in source.data.items()}
                if action == "patch":
                    patches = {k: [(0, "x" if isinstance(v[0], str) else 0.5)]
                               for k, v in columns.items() if v}
                    if not patches:
                        continue
                    source.patch(patches)
                else:
                    source.stream({k: [1.0] for k in columns},
                                  rollover=1 if action == "rollover" else None)
                answer = await connection.reply_to(
                    connection.protocol.create("PATCH-DOC", events))
                answers.append((action, source.name, answer and answer.msgtype))
            newcomers.append((action, await newcomer(every_tab)))
        # the attacking session's own document took the messages
        changed = data_sources(await pull(connection))
        connection.close()
        return before, answers, newcomers, changed

    try:
        before, answers, newcomers, changed = run_in_thread(attack, 180)
        one_draw = run_in_thread(lambda: newcomer(srv.url, every=False), 60)
        responses = [urllib.request.urlopen(srv.url + q, timeout=30) for q in ("", "?keys=64")]
        pages = [(r.status, r.read().decode()) for r in responses]
    finally:
        out = srv.stop()
    assert ARGUMENT_SOURCES <= before.keys()          # every tab's sources were attacked
    assert len(answers) > 2 * len(before)
    assert all(msgtype == "OK" for *_, msgtype in answers), answers
    assert changed["scaled-weights-source"]["key"] == [1.0]     # the messages took effect
    keys = [f"k{i + 1}" for i in range(core.N_KEYS)]
    assert before["scaled-weights-source"]["key"] == keys
    for action, after in newcomers:
        assert after == before, action
    assert one_draw["scaled-weights-source"]["key"] == keys
    # the same but for the argument's tabs (not built on the one draw's) and the address
    # (its tab) in the texts' fields
    assert {k: v for k, v in one_draw.items() if k not in ARGUMENT_SOURCES | {"text-source"}} \
        == {k: v for k, v in before.items() if k not in ARGUMENT_SOURCES | {"text-source"}}
    for status, html in pages:
        assert status == 200 and "Traceback" not in html
    assert "Traceback" not in out


#: The heaviest address the controls allow, every argument tab built (opening one builds and
#: draws them all): 64 keys, the widest head, the first key aligned with the query.
HEAVIEST = "?tab=saturation&keys=64&d_k=4096&align=1&temperature=0.1"


def test_sessions_at_the_heaviest_address_up_to_the_cap_stay_within_the_sizing(tmp_path):
    """The default cap's sizing (server/limits.py) holds at the heaviest address: a process with
    ``cap`` such sessions open, each a page, its websocket and its document, stays under
    BASE_MIB + cap x SESSION_MIB (no headroom), read as the sizing reads it (after the
    server's periodic garbage collection), and the next visitor gets the 503. Over
    20 s: twelve sessions at the heaviest address, each a page, its websocket and its
    document, built one after another."""
    from attention_scaling import server
    cap = 12
    srv = Server("--stats", "--max-sessions", str(cap), log=tmp_path / "server.log")

    async def fill():
        sockets = []
        for i in range(cap):
            connection = await open_session(srv.url + HEAVIEST)
            doc = await every_tab_pulled(connection, decode=i == cap - 1)
            sockets.append(connection)
        def read():
            return json.loads(urllib.request.urlopen(srv.url + "stats", timeout=30).read())

        # the memory as the sizing reads it: after the server's next periodic collection
        # (server/collect.py), which freezes what survived and so moves gc_frozen
        built = await asyncio.to_thread(read)
        stats = built
        while stats["gc_frozen"] == built["gc_frozen"]:
            await asyncio.sleep(0.5)
            stats = await asyncio.to_thread(read)
        try:
            urllib.request.urlopen(srv.url + HEAVIEST, timeout=30)
            past = 200
        except urllib.error.HTTPError as err:
            past = err.code
        for ws in sockets:
            ws.close()
        return data_sources(doc), stats, past

    try:
        sources, stats, past = run_in_thread(fill, 240)
    finally:
        out = srv.stop()
    assert len(sources["scaled-weights-source"]["key"]) == 64        # the heaviest, built
    assert len(sources["jacobian-source"]["value"]) == 64 * 64
    assert ARGUMENT_SOURCES <= sources.keys()
    assert stats["sessions"] == cap and past == 503
    rss_mib = stats["rss_kib"] / 1024
    assert rss_mib < server.BASE_MIB + cap * server.SESSION_MIB, rss_mib
    assert "Traceback" not in out
