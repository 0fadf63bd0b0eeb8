"""The search tool over a real bm25s index, in process and over a real HTTP server."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

pytest.importorskip("bm25s")

from gem_core.tools.search import DEFAULT_CORPUS, SearchIndex, SearchServer, SearchTool, read_jsonl

pytestmark = pytest.mark.timeout(120)

DOCS = [
    {
        "id": "paris",
        "title": "Paris",
        "text": "Paris is the capital and largest city of France, on the Seine.",
    },
    {"id": "berlin", "title": "Berlin", "text": "Berlin is the capital of Germany and its largest city."},
    {
        "id": "python",
        "title": "Python",
        "text": "Python is a programming language created by Guido van Rossum.",
    },
    {
        "id": "everest",
        "title": "Mount Everest",
        "text": "Mount Everest is Earth's highest mountain above sea level.",
    },
    {
        "id": "nile",
        "title": "Nile",
        "text": "The Nile is a major river in northeastern Africa, flowing to the Mediterranean.",
    },
    {
        "id": "curie",
        "title": "Marie Curie",
        "text": "Marie Curie won Nobel prizes in physics and chemistry for radioactivity.",
    },
    {"id": "mars", "title": "Mars", "text": "Mars is the fourth planet from the Sun, called the Red Planet."},
    {
        "id": "bach",
        "title": "Johann Sebastian Bach",
        "text": "Bach was a German composer of the Baroque period.",
    },
]


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "corpus.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    return path


@pytest.fixture(scope="module")
def index(corpus_file):
    return SearchIndex.from_jsonl(corpus_file)


def test_bm25_ranks_the_matching_document_first(index):
    assert index.search("capital of France")[0]["id"] == "paris"
    assert index.search("who created the Python programming language")[0]["id"] == "python"
    assert index.search("highest mountain")[0]["id"] == "everest"
    hits = index.search("capital city", k=2)
    assert {h["id"] for h in hits} == {"paris", "berlin"}
    assert hits[0]["score"] >= hits[1]["score"] > 0


def test_k_and_queries_that_match_nothing(index):
    assert len(index.search("the capital city of a country", k=1)) == 1
    assert len(index.search("capital", k=100)) == 2  # only the documents that match
    assert index.search("the of and is") == []  # stop words only
    assert index.search("xylophone quasar") == []
    assert index.search("") == []


def test_index_round_trips_through_disk(index, tmp_path):
    index.save(tmp_path / "idx")
    loaded = SearchIndex.load(tmp_path / "idx")
    assert len(loaded) == len(DOCS)
    for query in ("river in Africa", "German composer", "red planet"):
        assert loaded.search(query) == index.search(query)


def test_read_jsonl_requires_text(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1, "title": "x"}\n')
    with pytest.raises(ValueError, match="text"):
        read_jsonl(bad)


def test_tool_parses_and_formats(index):
    tool = SearchTool(index=index, k=2)
    assert (
        tool.parse("I should look it up. <search> Nobel prize radioactivity </search>")
        == "Nobel prize radioactivity"
    )
    assert tool.parse("no search here") is None
    assert tool.parse("<search>   </search>") is None
    observation, ok = tool.execute("Nobel prize radioactivity")
    assert ok and observation.startswith("<information>Doc 1 (Title: Marie Curie)")
    assert observation.endswith("</information>")
    observation, ok = tool.execute("xylophone")
    assert ok and "No passage matches" in observation
    assert "<search>" in tool.instruction()


@pytest.mark.parametrize(
    "action", ["", "A" * 100_000, "<search>" * 10_000, "\x00\xff" * 500, "<search>\ud7ff</search>"]
)
def test_tool_survives_hostile_actions(index, action):
    tool = SearchTool(index=index)
    call = tool.parse(action)
    if call is not None:
        observation, _ = tool.execute(call)
        assert observation.startswith("<information>")


def test_tool_defaults_to_a_corpus_file(corpus_file):
    tool = SearchTool(corpus=corpus_file)
    assert "Title: Berlin" in tool.execute("capital of Germany")[0]
    assert SearchTool(corpus=corpus_file).index is tool.index  # indexed once per process
    with pytest.raises(FileNotFoundError):
        SearchTool(corpus=corpus_file.with_name("missing.jsonl"))


def test_shipped_qa_corpus():
    docs = read_jsonl(DEFAULT_CORPUS)  # ships in the wheel (gem_core/data/qa)
    assert len(docs) >= 5
    tool = SearchTool(k=3)
    for doc in docs[:: max(1, len(docs) // 5)][:5]:
        # A document's own title and opening words find it among the top passages.
        query = f"{doc['title']} {' '.join(doc['text'].split()[:8])}"
        ids = [hit["id"] for hit in tool.search(query)]
        assert doc["id"] in ids, (query, ids)


# ---- over HTTP ----------------------------------------------------------------------------------
def test_http_server_gives_the_same_results_as_the_index(index):
    with SearchServer(index) as server:
        assert server.url.startswith("http://127.0.0.1:")
        remote = SearchTool(url=server.url, k=3)
        local = SearchTool(index=index, k=3)
        for query in ("capital of France", "river", "German composer Baroque"):
            assert remote.execute(query) == local.execute(query)
        with urllib.request.urlopen(server.url + "/health", timeout=5) as response:
            assert json.loads(response.read()) == {"ok": True, "documents": len(DOCS)}


def test_http_server_serves_many_clients_at_once(index):
    with SearchServer(index) as server:
        tool = SearchTool(url=server.url)
        answers: list[str] = []

        def ask() -> None:
            for _ in range(5):
                answers.append(tool.execute("highest mountain")[0])

        threads = [threading.Thread(target=ask) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(answers) == 30 and all("Mount Everest" in a for a in answers)


def test_http_server_rejects_bad_requests(index):
    with SearchServer(index) as server:
        for body in (b"not json", b'{"k": 3}', b'{"query": 5}'):
            request = urllib.request.Request(server.url + "/search", data=body, method="POST")
            with pytest.raises(urllib.error.HTTPError) as info:
                urllib.request.urlopen(request, timeout=5)
            assert info.value.code == 400 and "bad request" in json.loads(info.value.read())["error"]
        # The server keeps answering after bad requests.
        assert SearchTool(url=server.url).execute("Paris")[1]


def test_server_down_gives_a_clear_error_observation(index):
    server = SearchServer(index).start()
    url = server.url
    server.close()
    tool = SearchTool(url=url, timeout=2)
    start = time.monotonic()
    observation, ok = tool.execute("capital of France")
    assert not ok and time.monotonic() - start < 3
    assert "not reachable" in observation and "python -m gem_core.tools.search serve" in observation


def test_server_that_never_answers_times_out():
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)  # accepts connections into the backlog, never replies
    try:
        tool = SearchTool(url=f"http://127.0.0.1:{silent.getsockname()[1]}", timeout=0.5)
        start = time.monotonic()
        observation, ok = tool.execute("anything")
        assert not ok and "did not answer within 0.5 s" in observation
        assert time.monotonic() - start < 3
    finally:
        silent.close()


def test_command_line_server(corpus_file, free_port):
    port = free_port
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gem_core.tools.search",
            "serve",
            "--corpus",
            str(corpus_file),
            "--port",
            str(port),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        assert f"serving {len(DOCS)} documents at http://127.0.0.1:{port}/search" in line
        observation, ok = SearchTool(url=f"http://127.0.0.1:{port}").execute("fourth planet from the Sun")
        assert ok and "Title: Mars" in observation
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_a_pickled_tool_searches_the_same_index(index):
    import pickle

    tool = SearchTool(index=index, k=2)
    copy = pickle.loads(pickle.dumps(tool))
    assert copy.execute("river in Africa") == tool.execute("river in Africa")
