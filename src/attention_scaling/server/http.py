"""What every response carries (headers, gzip of the static files once) and Bokeh's document
validation, which sessions skip."""

from __future__ import annotations

import logging
import re
from urllib.parse import urlsplit

from bokeh.settings import settings
from tornado import web

log = logging.getLogger("attention_scaling.server")
#: A host name or address as a log may repeat it.
_HOST = re.compile(r"^[A-Za-z0-9.-]{1,100}$|^\[[0-9A-Fa-f:.]{2,45}\]$")

_FRAME_SOURCE = re.compile(
    r"^('self'|'none'|\*|[a-z][a-z0-9+.-]*:|([a-z][a-z0-9+.-]*://)?(\*\.)?"
    r"[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*(:([0-9]{1,5}|\*))?(/[A-Za-z0-9._~/-]*)?)$")


def check_frame_ancestors(text: str) -> str:
    """The sources of a ``Content-Security-Policy: frame-ancestors`` directive, checked:
    ``*``, ``'self'``, ``'none'``, schemes (``https:``) or hosts
    (``https://*.example.edu``), separated by spaces or commas (no source holds either).
    ValueError for anything else."""
    sources = [s for s in re.split(r"[,\s]+", text) if s]
    if not sources:
        raise ValueError("frame ancestors must name at least one source, e.g. * or 'self'")
    for source in sources:
        if not _FRAME_SOURCE.match(source):
            raise ValueError(f"{source!r} is not a frame-ancestors source (use *, 'self', "
                             "'none', https: or a host such as https://lms.example.edu)")
    if "'none'" in sources and len(sources) > 1:
        raise ValueError("'none' cannot be combined with other frame-ancestors sources")
    return " ".join(sources)


_DEFAULT_PORT = {"http": 80, "https": 443}
#: A host source: an optional scheme, an optional "*." label, the host, an optional port.
_HOST_SOURCE = re.compile(r"^(?:([a-z][a-z0-9+.-]*)://)?(\*\.)?([^:/]+)(?::([0-9]+|\*))?")


def _scheme_matches(want: str, scheme: str) -> bool:
    """CSP lets an http source match https too, not the other way round."""
    return want == scheme or (want == "http" and scheme == "https")


def _host_source_matches(source: str, scheme: str, host: str, port) -> bool:
    want = _HOST_SOURCE.match(source)
    if want is None or (want[1] and not _scheme_matches(want[1], scheme)):
        return False
    name = want[3].lower()
    if not (host.endswith("." + name) if want[2] else host == name):
        return False
    if want[4] == "*":
        return True
    return (int(want[4]) if want[4] else _DEFAULT_PORT.get(want[1] or scheme)) == port


def frame_source_allows(sources: list[str], origin: str, own: str) -> bool:
    """Whether a page of ``origin`` (scheme://host[:port]) may embed this server's page of
    origin ``own`` under the frame-ancestors ``sources``, as a browser matches them ('self',
    a scheme, a host with an optional scheme, ``*.`` label and port); a path is ignored."""
    found = urlsplit(origin)
    scheme, host = found.scheme, found.hostname or ""
    port = found.port or _DEFAULT_PORT.get(scheme)
    for source in sources:
        if source == "*" or (source == "'self'" and origin == own):
            return True
        if source.startswith("'"):
            continue
        if source.endswith(":") and "/" not in source:
            if _scheme_matches(source[:-1], scheme):
                return True
        elif _host_source_matches(source, scheme, host, port):
            return True
    return False


def security_headers(frame_ancestors: str = "*"):
    """A Tornado output transform that gives every response ``X-Content-Type-Options``,
    ``Referrer-Policy``, a charset on HTML and, unless ``frame_ancestors`` is ``*``,
    ``Content-Security-Policy: frame-ancestors``, and drops the ``Server`` header (Tornado's
    name and version). ``*`` sends no policy: a ``frame-ancestors *`` policy would still
    refuse parents with an opaque origin (a course page opened from a file, a sandboxed
    iframe of an LMS, about:blank), and any page may embed the explorer by default."""
    sources = check_frame_ancestors(frame_ancestors)
    policy = None if sources == "*" else f"frame-ancestors {sources}"
    said: set[str] = set()      # the embedding sites told about, once each (the first 64)

    class SecurityHeaders(web.OutputTransform):
        def __init__(self, request):
            super().__init__(request)
            self._request = request

        def _refused_embed(self) -> None:
            """A page that the policy does not allow asked for this one in an iframe: the
            browser shows its own "refused to connect" there, which looks like a server that
            is down; say once per embedding site what to set."""
            request = self._request
            if request.headers.get("Sec-Fetch-Dest") != "iframe":
                return
            try:
                found = urlsplit(request.headers.get("Referer", ""))
                port = found.port
            except ValueError:
                return
            host = found.hostname or ""
            if found.scheme not in ("http", "https") or not _HOST.match(host):
                return
            origin = f"{found.scheme}://{host}" + (f":{port}" if port else "")
            if origin in said or len(said) >= 64:
                return
            own = f"{request.protocol}://{request.host}"
            if frame_source_allows(sources.split(), origin, own):
                return
            said.add(origin)
            log.error("A page at %s embedded the explorer in an iframe, which --frame-ancestors "
                      "(%s) does not allow: the browser shows its own \"refused to connect\" "
                      "there. To allow it, add %s to --frame-ancestors or "
                      "ATTENTION_SCALING_FRAME_ANCESTORS.", origin, sources, origin)

        def transform_first_chunk(self, status_code, headers, chunk, finishing):
            headers["X-Content-Type-Options"] = "nosniff"
            headers["Referrer-Policy"] = "same-origin"
            kind = headers.get("Content-Type", "")
            if policy:
                headers["Content-Security-Policy"] = policy
                if status_code == 200 and kind.startswith("text/html"):
                    self._refused_embed()
            if kind.startswith("text/html") and "charset" not in kind:
                headers["Content-Type"] = "text/html; charset=UTF-8"
            if "Server" in headers:
                del headers["Server"]
            return status_code, headers, chunk

    return SecurityHeaders


# ---- static files compressed once --------------------------------------------------------
#: Upper bound on the gzipped static files kept in memory (Bokeh's and Panel's: ~0.8 MB).
GZIP_CACHE_MAX_BYTES = 32 * 2**20
_GZIP_CACHE: dict[tuple[str, str], bytes] = {}


class GzipStaticOnce(web.GZipContentEncoding):
    """Tornado's gzip transform, and for a complete ``200`` answer to a GET under
    ``/static/`` (a file named by the content hash in its ``Etag``) the compressed body is
    kept and sent whole the next time: the page's 5.7 MB of scripts are compressed once per
    process, not for every page load (~130 ms of the server's thread each)."""

    def __init__(self, request):
        super().__init__(request)
        self._accepts = "gzip" in request.headers.get("Accept-Encoding", "")
        self._static = request.method == "GET" and "/static/" in request.path
        self._path = request.path
        self._parts: list[bytes] | None = None
        self._key = None
        self._hit = False
        self._size = self._fed = 0

    def transform_first_chunk(self, status_code, headers, chunk, finishing):
        etag = headers.get("Etag")
        if (self._accepts and self._static and status_code == 200 and etag
                and "Content-Range" not in headers and "Content-Encoding" not in headers):
            key = (self._path, etag)
            found = _GZIP_CACHE.get(key)
            if found is not None:
                self._hit = True
                headers["Vary"] = (headers["Vary"] + ", Accept-Encoding" if "Vary" in headers
                                   else "Accept-Encoding")
                headers["Content-Encoding"] = "gzip"
                headers["Content-Length"] = str(len(found))
                return status_code, headers, found
            self._key, self._parts = key, []
            self._size = int(headers.get("Content-Length", -1))
        answer = super().transform_first_chunk(status_code, headers, chunk, finishing)
        if answer[1].get("Content-Encoding") != "gzip":     # Tornado chose not to compress
            self._parts = None
        return answer

    def transform_chunk(self, chunk, finishing):
        if self._hit:
            return b""          # the whole body went with the first chunk
        self._fed += len(chunk)
        out = super().transform_chunk(chunk, finishing)
        if self._parts is not None:
            self._parts.append(out)
            # Tornado also finishes a response whose client went away mid-file: keep only
            # what compressed the whole file
            if finishing:
                body = b"".join(self._parts)
                if (self._fed == self._size and sum(map(len, _GZIP_CACHE.values()))
                        + len(body) <= GZIP_CACHE_MAX_BYTES):
                    _GZIP_CACHE[self._key] = body
                self._parts = None
        return out


def skip_document_validation() -> None:
    """Bokeh checks every model of a document when a session opens (~4-8% of the work of
    opening a tab); the page's document is the same for every session and a unit test
    validates it instead. Bokeh's public setting, unless BOKEH_VALIDATE_DOC is set."""
    import os
    if "BOKEH_VALIDATE_DOC" not in os.environ:
        settings.perform_document_validation.set_value(False)
