"""A client of the explorer's server speaking Bokeh's websocket protocol as a page does:
the session token a page carries, its websocket (subprotocol ``bokeh`` with the token), and
whole messages sent and read with Bokeh's own protocol classes (``bokeh.protocol``:
``Protocol.assemble`` and ``Protocol.create`` make them, its ``Receiver`` puts the frames
read back together). The tests and the load test (benchmarks/loadtest.py) both use it."""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import re
import zlib

from bokeh.protocol import Protocol
from bokeh.protocol.receiver import Receiver

#: The event BokehJS sends in a PATCH-DOC once it has shown a session's document (the server
#: then builds a session's other argument tabs: page.Explorer.build_rest).
DOCUMENT_READY = {"kind": "MessageSent", "msg_type": "bokeh_event", "msg_data": {
    "type": "event", "name": "document_ready", "values": {"type": "map"}}}

_TOKEN = (re.compile(r'"token"\s*:\s*"([^"]+)"'),
          re.compile(r"token\\*['\"]\s*:\s*\\*['\"]([A-Za-z0-9_.\-]+)"))


def page_token(html: str) -> str:
    """The Bokeh session token a served page carries (what its websocket presents)."""
    for pattern in _TOKEN:
        found = pattern.search(html)
        if found:
            return found.group(1)
    raise ValueError("no session token in the page")


def token_payload(token: str) -> dict:
    """A Bokeh session token's payload, decoded (Bokeh zlib-packs the request's details)."""
    def unb64(text: str) -> bytes:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))

    payload = json.loads(unb64(token.split(".")[0]))
    packed = payload.pop("__bk__zlib_", None)
    if packed:
        payload.update(json.loads(zlib.decompress(unb64(packed))))
    return payload


def websocket_url(url: str) -> str:
    """The /ws address of the page served at ``url`` (its query left out; wss for https)."""
    return "ws" + url.split("?")[0].removeprefix("http").rstrip("/") + "/ws"


def ready_patch() -> dict:
    """A PATCH-DOC's content announcing document_ready."""
    return {"events": [DOCUMENT_READY]}


class _Writer:
    """What ``Message.write_buffers`` writes a message's buffers to: the websocket."""

    def __init__(self, ws) -> None:
        self.ws = ws

    async def write_message(self, message, binary: bool = False, locked: bool = True) -> None:
        await self.ws.write_message(message, binary=binary)


class Connection:
    """One websocket of a session, speaking Bokeh's protocol. ``ws`` is the Tornado
    connection itself, for what a stranger sends that is not a message."""

    _ids = itertools.count(1)

    def __init__(self, ws, token: str | None = None) -> None:
        self.ws = ws
        self.token = token            # the session token it presented, where known
        self.protocol = Protocol()
        self.receiver = Receiver(self.protocol)

    @classmethod
    async def connect(cls, url: str, token: str, headers: dict | None = None,
                      timeout: float = 30, **options) -> "Connection":
        """A websocket to the page at ``url`` presenting ``token``, from the page's own origin
        unless ``headers`` names another (Tornado's HTTPClientError when refused), with
        TCP_NODELAY as browsers set it (the second and third frames of a message do not wait
        for the server's delayed ACK). ``options`` go to Tornado's websocket_connect."""
        from tornado.httpclient import HTTPRequest
        from tornado.websocket import websocket_connect
        origin = url.split("/", 3)
        request = HTTPRequest(websocket_url(url), connect_timeout=timeout,
                              request_timeout=timeout,
                              headers={"Origin": f"{origin[0]}//{origin[2]}", **(headers or {})})
        ws = await asyncio.wait_for(
            websocket_connect(request, subprotocols=["bokeh", token], **options), timeout)
        ws.protocol.set_nodelay(True)
        return cls(ws, token)

    @classmethod
    async def open(cls, url: str, timeout: float = 120) -> "Connection":
        """A session as a page opens one: the page at ``url`` (query included), its
        websocket, the server's ACK."""
        from tornado.httpclient import AsyncHTTPClient
        html = (await AsyncHTTPClient().fetch(url, request_timeout=timeout)).body.decode()
        token = page_token(html)
        connection = await cls.connect(url, token, timeout=timeout)
        ack = await connection.receive(timeout)
        if ack is None or ack.msgtype != "ACK":
            connection.close()
            raise ConnectionError(f"no ACK from the server: {ack!r}")
        return connection

    def message(self, msgtype: str, content: dict | None = None, **header):
        """A message of ``msgtype`` with ``content`` (its header: a new msgid and
        ``header``), as bokeh.protocol assembles it."""
        head = {"msgid": f"t{next(self._ids)}", "msgtype": msgtype, **header}
        return self.protocol.assemble(json.dumps(head), "{}", json.dumps(content or {}))

    async def send(self, msgtype: str, content: dict | None = None, **header) -> str:
        """Send a message of ``msgtype`` (:meth:`message`); its msgid."""
        return await self.send_message(self.message(msgtype, content, **header))

    async def send_message(self, message) -> str:
        """Send a whole message: header, metadata and content frames, then its buffers."""
        for part in (message.header_json, message.metadata_json, message.content_json):
            await self.ws.write_message(part)
        await message.write_buffers(_Writer(self.ws), locked=False)
        return message.header["msgid"]

    async def receive(self, timeout: float = 30):
        """The next whole message the server sends (None once the socket has closed, before
        it or in its middle); asyncio.TimeoutError after ``timeout`` s."""
        while True:
            fragment = await asyncio.wait_for(self.ws.read_message(), timeout)
            if fragment is None:
                return None
            message = await self.receiver.consume(fragment)
            if message is not None:
                return message

    async def reply_to(self, message, timeout: float = 30):
        """Send ``message`` and return the server's reply to it (OK, ERROR, PULL-DOC-REPLY),
        passing over what the server sends of its own meanwhile; None if the socket closed."""
        msgid = await self.send_message(message)
        while True:
            answer = await self.receive(timeout)
            if answer is None or answer.header.get("reqid") == msgid:
                return answer

    async def pull(self, timeout: float = 30):
        """The session's document: the PULL-DOC-REPLY message (``.content["doc"]``, or
        :func:`document` for its models), None if the socket closed first."""
        return await self.reply_to(self.message("PULL-DOC-REQ"), timeout)

    async def ready(self) -> str:
        """Say the document is shown (document_ready, as BokehJS does); the msgid."""
        return await self.send("PATCH-DOC", ready_patch())

    @property
    def close_code(self):
        return self.ws.close_code

    def close(self) -> None:
        self.ws.close()


def document(reply):
    """The Bokeh Document a PULL-DOC-REPLY carries, its models built in this process."""
    from bokeh.document import Document
    doc = Document()
    reply.push_to_document(doc)
    return doc


def models_by_name(doc: dict) -> dict:
    """A document's models with a name, from its JSON (a PULL-DOC-REPLY's ``doc``):
    name -> (id, attributes)."""
    found, stack = {}, [doc]
    while stack:
        o = stack.pop()
        if isinstance(o, list):
            stack.extend(o)
        elif isinstance(o, dict):
            name = o.get("attributes", {}).get("name") if o.get("type") == "object" else None
            if isinstance(name, str) and "id" in o:
                found[name] = (o["id"], o["attributes"])
            stack.extend(o.values())
    return found
