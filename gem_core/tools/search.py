"""SearchTool: ``<search>query</search>`` returns the top-k passages of a local BM25 index.

Three pieces, one protocol (a query and ``k`` in, ranked ``{id, title, text, score}`` out):

``SearchIndex``   a BM25 index (the ``bm25s`` library) over documents ``{"id", "title", "text"}``,
                  built from a JSONL file or a list, saved to and loaded from a directory
``SearchServer``  serves one index over HTTP (``POST /search``, ``GET /health``) so many trainer
                  processes can share it: ``python -m gem_core.tools.search serve --corpus FILE``
``SearchTool``    the agent-facing tool, backed by an index in this process or by a server URL;
                  server errors (down, slow, bad reply) come back as observations, with a hint

By default the tool searches the corpus that ships with the QA envs (``gem_core/data/qa/corpus.jsonl``).
``bm25s`` is imported only when an index is built or loaded (install the ``tools`` extra).
"""

from __future__ import annotations

import argparse
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from gem_core.parsing import extract_tag, preview
from gem_core.tools.base import Tool

DEFAULT_CORPUS = Path(__file__).resolve().parents[1] / "data" / "qa" / "corpus.jsonl"
MAX_QUERY_CHARS = 1_000
MAX_K = 50
MAX_REQUEST_BYTES = 64 * 1024


def _bm25s():
    try:
        import bm25s
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise ImportError("the search tool needs bm25s: pip install 'gem-core[tools]'") from exc
    return bm25s


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Documents from a JSONL file, one ``{"id", "title", "text"}`` object per line."""
    docs = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                doc = json.loads(line)
                if "text" not in doc:
                    raise ValueError(f"{path}:{number}: a document needs a 'text' field")
                docs.append(
                    {"id": str(doc.get("id", number)), "title": doc.get("title", ""), "text": doc["text"]}
                )
    return docs


class SearchIndex:
    """BM25 (``bm25s``, English stop words) over titles and texts of ``documents``."""

    def __init__(self, documents: Iterable[dict[str, Any]], *, _retriever: Any = None):
        self.documents = [
            {"id": str(d.get("id", i)), "title": str(d.get("title", "")), "text": str(d["text"])}
            for i, d in enumerate(documents)
        ]
        if not self.documents:
            raise ValueError("a search index needs at least one document")
        bm25s = _bm25s()
        if _retriever is None:
            tokens = bm25s.tokenize(
                [f"{d['title']}\n{d['text']}" for d in self.documents], stopwords="en", show_progress=False
            )
            _retriever = bm25s.BM25()
            _retriever.index(tokens, show_progress=False)
        self._retriever = _retriever

    @classmethod
    def from_jsonl(cls, path: str | Path) -> SearchIndex:
        return cls(read_jsonl(path))

    def save(self, directory: str | Path) -> None:
        self._retriever.save(str(directory), corpus=self.documents, show_progress=False)

    @classmethod
    def load(cls, directory: str | Path) -> SearchIndex:
        retriever = _bm25s().BM25.load(str(directory), load_corpus=True, show_progress=False)
        documents = list(retriever.corpus)
        retriever.corpus = None
        return cls(documents, _retriever=retriever)

    def search(self, query: str, k: int = 3) -> list[dict[str, Any]]:
        """The ``k`` best documents for ``query`` (fewer when fewer match), best first."""
        k = max(1, min(int(k), MAX_K, len(self.documents)))
        words = _bm25s().tokenize(
            str(query)[:MAX_QUERY_CHARS], stopwords="en", return_ids=False, show_progress=False
        )[0]
        words = [w for w in words if w in self._retriever.vocab_dict]
        if not words:
            return []
        ids, scores = self._retriever.retrieve([words], k=k, show_progress=False, n_threads=0)
        return [
            {**self.documents[int(i)], "score": round(float(s), 4)}
            for i, s in zip(ids[0], scores[0])
            if float(s) > 0
        ]

    def __len__(self) -> int:
        return len(self.documents)


# ---- HTTP ---------------------------------------------------------------------------------------
class SearchServer:
    """Serves ``index`` at ``http://host:port`` (``port=0`` picks a free one) from a background thread.

    ``POST /search`` with ``{"query": str, "k": int}`` answers ``{"results": [...]}``; ``GET /health``
    answers ``{"ok": true, "documents": N}``. Bad requests get a 400 with ``{"error": ...}``.
    """

    def __init__(self, index: SearchIndex, host: str = "127.0.0.1", port: int = 0):
        self.index = index
        self._httpd = ThreadingHTTPServer((host, port), _handler_for(index))
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> SearchServer:
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.05,), name="gem-search-server", daemon=True
        )
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._httpd.serve_forever()

    def close(self) -> None:
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join()
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> SearchServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def _handler_for(index: SearchIndex) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/health":
                self._reply(200, {"ok": True, "documents": len(index)})
            else:
                self._reply(404, {"error": f"unknown path {self.path}; use POST /search or GET /health"})

        def do_POST(self) -> None:
            if self.path != "/search":
                self._reply(404, {"error": f"unknown path {self.path}; use POST /search"})
                return
            try:
                size = int(self.headers.get("Content-Length", "0"))
                if not 0 < size <= MAX_REQUEST_BYTES:
                    raise ValueError(f"the body must be 1 to {MAX_REQUEST_BYTES} bytes")
                request = json.loads(self.rfile.read(size))
                query, k = request["query"], request.get("k", 3)
                if not isinstance(query, str) or not isinstance(k, int):
                    raise ValueError("'query' must be a string and 'k' an integer")
            except (ValueError, KeyError, TypeError) as exc:
                self._reply(400, {"error": f"bad request: {exc}"})
                return
            self._reply(200, {"results": index.search(query, k)})

        def _reply(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # one line per request would drown a trainer's log

    return Handler


class SearchError(RuntimeError):
    """The search backend could not answer; the message says why and what to do."""


def search_remote(url: str, query: str, k: int, timeout: float) -> list[dict[str, Any]]:
    """Ask the ``SearchServer`` at ``url``; raises ``SearchError`` with a clear message."""
    request = urllib.request.Request(
        url.rstrip("/") + "/search",
        data=json.dumps({"query": query, "k": k}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read())["results"]
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode("utf-8", "replace")[:200]
        raise SearchError(f"the search server at {url} answered HTTP {exc.code}: {detail}") from exc
    except (urllib.error.URLError, ConnectionError) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, TimeoutError):
            raise SearchError(f"the search server at {url} did not answer within {timeout:g} s") from exc
        raise SearchError(
            f"the search server at {url} is not reachable ({reason}); start one with "
            "`python -m gem_core.tools.search serve --corpus FILE --port PORT`"
        ) from exc
    except TimeoutError as exc:
        raise SearchError(f"the search server at {url} did not answer within {timeout:g} s") from exc
    except (ValueError, KeyError, TypeError) as exc:
        raise SearchError(f"the search server at {url} sent a malformed reply ({exc})") from exc


# ---- the tool -----------------------------------------------------------------------------------
class SearchTool(Tool):
    """``<search>query</search>`` -> ``<information>`` with the top ``k`` passages.

    Give ``url`` to use a ``SearchServer``, or ``index`` / ``corpus`` (a JSONL path) for an index in
    this process; with none of them the QA envs' shipped corpus is indexed.
    """

    name = "search"
    _indexes: dict[str, SearchIndex] = {}  # one index per corpus file per process
    _lock = threading.Lock()

    def __init__(
        self,
        index: SearchIndex | None = None,
        url: str | None = None,
        corpus: str | Path | None = None,
        k: int = 3,
        timeout: float = 5.0,
        max_chars_per_doc: int = 1_000,
    ):
        if index is not None and url is not None:
            raise ValueError("give an index or a url, not both")
        if index is None and url is None:
            index = self._index_for(Path(corpus) if corpus is not None else DEFAULT_CORPUS)
        self.index, self.url = index, url
        self.k, self.timeout, self.max_chars_per_doc = k, timeout, max_chars_per_doc

    @classmethod
    def _index_for(cls, corpus: Path) -> SearchIndex:
        if not corpus.exists():
            raise FileNotFoundError(f"no corpus at {corpus}: pass corpus=, index= or url=")
        key = str(corpus.resolve())
        with cls._lock:
            if key not in cls._indexes:
                cls._indexes[key] = SearchIndex.from_jsonl(corpus)
            return cls._indexes[key]

    def instruction(self) -> str:
        return (
            "You can search a document collection: write <search> your query </search> and the top "
            f"{self.k} passages come back inside <information> ... </information>. Search as many times "
            "as you need, then give your final answer."
        )

    def parse(self, action: str) -> str | None:
        query = extract_tag(action, "search")
        return query[:MAX_QUERY_CHARS] if query else None

    def search(self, query: str) -> list[dict[str, Any]]:
        if self.url is not None:
            return search_remote(self.url, query, self.k, self.timeout)
        return self.index.search(query, self.k)

    def execute(self, call: str) -> tuple[str, bool]:
        try:
            results = self.search(call)
        except SearchError as exc:
            return f"<information>[search error: {exc}]</information>", False
        if not results:
            return f"<information>No passage matches '{preview(call)}'.</information>", True
        lines = []
        for rank, doc in enumerate(results, 1):
            text = doc["text"]
            if len(text) > self.max_chars_per_doc:
                text = text[: self.max_chars_per_doc] + " ..."
            lines.append(f"Doc {rank} (Title: {doc['title']}) {text}")
        return "<information>" + "\n".join(lines) + "</information>", True


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m gem_core.tools.search", description=__doc__.split("\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve a BM25 index over HTTP")
    serve.add_argument("--corpus", default=str(DEFAULT_CORPUS), help="JSONL file of {id, title, text}")
    serve.add_argument("--index", help="a directory saved by SearchIndex.save (instead of --corpus)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    index = SearchIndex.load(args.index) if args.index else SearchIndex.from_jsonl(args.corpus)
    server = SearchServer(index, args.host, args.port)
    print(f"serving {len(index)} documents at {server.url}/search", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()


if __name__ == "__main__":
    main()
