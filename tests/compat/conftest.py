"""Make the installed reference GEM (``gem-llm`` 0.1.0, module ``gem``) usable offline in these tests.

Its word games read NLTK's ``words`` corpus and call ``nltk.download("words")``: the corpus is laid
out from the copies ``gem_core`` ships (``gem_core/data/words/reference``) in a temporary NLTK data
directory, and ``nltk.download`` is made a no-op so nothing reaches for the network.
"""

from __future__ import annotations

import gzip
import os
import sys
from importlib import resources
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def reference_gem(tmp_path_factory):
    nltk = pytest.importorskip("nltk")
    words_dir = tmp_path_factory.mktemp("nltk_data") / "corpora" / "words"
    words_dir.mkdir(parents=True)
    shipped = resources.files("gem_core").joinpath("data", "words", "reference")
    (words_dir / "en-basic").write_bytes(shipped.joinpath("en-basic").read_bytes())
    (words_dir / "en").write_bytes(gzip.decompress(shipped.joinpath("en.gz").read_bytes()))
    patch = pytest.MonkeyPatch()
    patch.setattr(nltk.data, "path", [str(words_dir.parent.parent)])
    patch.setattr(nltk, "download", lambda *args, **kwargs: True)
    # the reference's sandbox runs a bare `python` from PATH; a stock system has only `python3`
    patch.setenv("PATH", os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    try:
        gem = pytest.importorskip("gem")
        yield gem
    finally:
        patch.undo()
