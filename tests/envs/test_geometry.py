"""Geometry figure envs and image observations: determinism down to the PNG bytes, answers checked
against the drawn figure, grading, wrappers, check_env on image observations, the Geometry3K Hub id."""

import hashlib
import io
import math
import pickle
import re
import subprocess
import sys
import time

import pytest

import gem_core
from gem_core.checker import EnvCheckError
from gem_core.envs.dataset import DatasetEnv, DatasetUnavailableError
from gem_core.envs.geometry import GeometryFiguresEnv, make_problem
from gem_core.observation import MultimodalObservation, png_bytes
from gem_core.wrappers import (
    ChatMessages,
    ChatTemplate,
    ConcatObservations,
    ContextBudget,
    LastKTurns,
    ObservationActionHistory,
)

pytest.importorskip("math_verify")
Image = pytest.importorskip("PIL.Image")

IDS = ["math:GeometryFigures-v0-easy", "math:GeometryFigures-v0-hard", "math:GeometryFigures-v0"]


# ---- the observation type -------------------------------------------------------------------------
def test_multimodal_observation_round_trips_and_its_repr_covers_the_pixels():
    red, blue = Image.new("RGB", (8, 6), "red"), Image.new("RGB", (8, 6), "blue")
    obs = MultimodalObservation.from_images("Find x.", [red])
    assert obs.images[0].startswith(b"\x89PNG") and obs.image_sizes() == [(8, 6)]
    assert obs == MultimodalObservation.from_images("Find x.", [red.copy()])
    assert hash(obs) == hash(MultimodalObservation.from_images("Find x.", [red.copy()]))
    other = MultimodalObservation.from_images("Find x.", [blue])
    assert obs != other and repr(obs) != repr(other) and "png 8x6 sha256:" in repr(obs)
    assert pickle.loads(pickle.dumps(obs)) == obs
    assert MultimodalObservation.from_json_dict(obs.to_json_dict()) == obs
    assert obs.pil_images()[0].tobytes() == red.tobytes()
    jpeg = io.BytesIO()
    red.save(jpeg, format="JPEG")
    assert png_bytes(jpeg.getvalue()).startswith(b"\x89PNG")  # other encodings become PNG
    assert png_bytes({"bytes": obs.images[0], "path": None}) == obs.images[0]
    with pytest.raises(TypeError, match="PNG bytes"):
        MultimodalObservation("x", (jpeg.getvalue(),))


def test_chat_content_is_the_multimodal_template_form():
    obs, _ = gem_core.make(IDS[0]).reset(seed=1)
    content = obs.to_chat_content()
    assert [part["type"] for part in content] == ["image", "text"] and content[1]["text"] == obs.text
    assert content[0]["image"].size == (384, 384)
    assert content[0]["image"].tobytes() == Image.open(io.BytesIO(obs.images[0])).convert("RGB").tobytes()
    assert obs.to_chat_content(with_images=False) == [{"type": "image"}, {"type": "text", "text": obs.text}]


# ---- determinism ------------------------------------------------------------------------------------
def test_same_seed_gives_byte_identical_figures_and_different_seeds_differ():
    a, b = gem_core.make(IDS[2]), gem_core.make(IDS[2])
    first, second = a.reset(seed=11)[0], b.reset(seed=11)[0]
    assert isinstance(first, MultimodalObservation) and first.images == second.images
    assert len({a.reset(seed=s)[0].images[0] for s in range(8)}) == 8
    cached = make_problem("hard", 0, 5)["images"][0]
    make_problem.cache_clear()
    assert make_problem("hard", 0, 5)["images"][0] == cached  # redrawn, not remembered


def test_figures_are_identical_in_a_fresh_process():
    script = (
        "import hashlib; from gem_core.envs.geometry import make_problem; "
        "print(' '.join(hashlib.sha256(make_problem(l, 3, i)['images'][0]).hexdigest() "
        "for l in ('easy', 'hard') for i in range(4)))"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    here = [
        hashlib.sha256(make_problem(lv, 3, i)["images"][0]).hexdigest()
        for lv in ("easy", "hard")
        for i in range(4)
    ]
    assert out.split() == here


def test_levels_draw_their_own_kinds():
    easy = {make_problem("easy", 0, i)["kind"] for i in range(60)}
    hard = {make_problem("hard", 0, i)["kind"] for i in range(60)}
    assert len(easy) == 7 and len(hard) == 8 and not easy & hard
    assert {make_problem("mixed", 0, i)["level"] for i in range(20)} == {"easy", "hard"}


# ---- answers are exact by construction: checked against the drawn figure ----------------------------
def value_of(answer: str) -> float:
    """An answer's number, read independently of the generator and of math-verify."""
    match = re.fullmatch(r"(\\frac\{(\d+)\}\{(\d+)\}|\d+)?(\\pi|\\sqrt\{(\d+)\})?", answer)
    assert match and answer, answer
    number, numerator, denominator, symbol, radicand = match.groups()
    coefficient = 1.0 if number is None else int(numerator) / int(denominator) if numerator else int(number)
    if symbol == "\\pi":
        return coefficient * math.pi
    return coefficient * (math.sqrt(int(radicand)) if radicand else 1.0)


def measured_angle(points, name: str) -> float:
    """The angle ``XVY`` (vertex in the middle) of the drawn points, in degrees (0..180)."""
    x, v, y = (points[c] for c in name)
    return math.degrees(
        abs(math.atan2(((y - v) * (x - v).conjugate()).imag, ((y - v) * (x - v).conjugate()).real))
    )


def polygon_area(points, names: str) -> float:
    ps = [points[c] for c in names]
    return abs(sum((p.conjugate() * q).imag for p, q in zip(ps, ps[1:] + ps[:1]))) / 2


def check_problem(p) -> str:
    """Verify one problem's answer from its figure; returns what was checked."""
    answer, points, facts, question = value_of(p["answer"]), p["points"], p["facts"], p["problem"]
    close = lambda a, b: abs(a - b) < 1e-6 * max(1.0, abs(b))  # noqa: E731
    if "angle" in facts:
        v, x, y = facts["angle"]  # the vertex first
        assert close(measured_angle(points, x + v + y), answer), p
        return "angle"
    if "expressions" in facts:
        for name, (k, c) in facts["expressions"].items():
            assert close(measured_angle(points, name), k * answer + c), p
        return "expressions"
    if "ccw_angle" in facts:
        o, a, b = (points[c] for c in facts["ccw_angle"])
        degrees = (
            math.degrees(math.atan2((b - o).imag, (b - o).real) - math.atan2((a - o).imag, (a - o).real))
            % 360
        )
        radius = abs(a - o)
        expected = degrees / 360 * (math.pi * radius**2 if "area" in question else 2 * math.pi * radius)
        assert close(expected, answer), p
        return "sector"
    if "length" in facts:
        (a, b), (c, d, given) = facts["length"], facts["unit"]
        assert close(abs(points[a] - points[b]) / abs(points[c] - points[d]) * given, answer), p
        return "length"
    if "Find the area of triangle" in question or "trapezoid" in question or "area of rectangle" in question:
        names = "ABC" if "triangle" in question else "ABCD"
        assert close(polygon_area(points, names), answer), p
        return "area"
    if "perimeter" in question:
        ps = [points[c] for c in "ABCD"]
        assert close(sum(abs(q - p) for p, q in zip(ps, ps[1:] + ps[:1])), answer), p
        return "perimeter"
    if "interior angles" in question:
        assert close((len(points) - 2) * 180, answer), p
        return "angle sum"
    if "circle O" in question:
        radius = abs(points["P"] - points["O"]) if "P" in points else float(facts["r"])
        if "A" in points:  # a drawn diameter AB
            radius = abs(points["A"] - points["B"]) / 2
        expected = math.pi * radius**2 if "area" in question else 2 * math.pi * radius
        assert close(expected, answer), p
        return "circle"
    raise AssertionError(f"no independent check for {p['kind']}: {p}")


def test_every_answer_matches_its_figure():
    checked = {}
    for level in ("easy", "hard"):
        for i in range(110):
            problem = make_problem(level, 1, i)
            checked.setdefault(problem["kind"], set()).add(check_problem(problem))
    assert len(checked) == 15, checked


def test_parallel_line_relations_are_right():
    for i in range(120):
        p = make_problem("easy", 2, i)
        if p["kind"] != "parallel_angle":
            continue
        given, x = p["facts"]["given"], int(p["answer"])
        relation = p["facts"]["relation"]
        assert (given + x == 180) if relation == "co-interior" else (given == x), p


# ---- grading ----------------------------------------------------------------------------------------
def pose(env, kind):
    for i in range(300):
        if env.unwrapped.examples[i]["kind"] == kind:
            obs, _ = env.reset(index=i)
            return obs, env.unwrapped.example
    raise AssertionError(kind)


@pytest.mark.parametrize(
    ("kind", "forms"),
    [
        ("angle_sum", ["{a}", "{a}^\\circ", "{a}" + "\N{DEGREE SIGN}", "x = {a}"]),
        ("circle_measure", ["{a}", "{a_times_pi}"]),
        ("right_triangle_side", ["{a}"]),
    ],
)
def test_equivalent_answers_are_correct(kind, forms):
    env = GeometryFiguresEnv(level="hard" if kind == "right_triangle_side" else "easy")
    env.reset(seed=0)
    _, example = pose(env, kind)
    answer = example["answer"]
    times_pi = answer.replace("\\pi", " \\cdot \\pi")
    for form in forms:
        env.reset(index=env.index)
        text = form.format(a=answer, a_times_pi=times_pi)
        _, reward, terminated, _, info = env.step(f"So the answer is \\boxed{{{text}}}.")
        assert (reward, terminated, info["success"]) == (1.0, True, True), (form, answer, info)


def test_wrong_and_unboxed_answers():
    env = gem_core.make(IDS[0])
    env.reset(seed=4)
    wrong = str(int(value_of(env.unwrapped.example["answer"])) + 1)
    _, reward, _, _, info = env.step(f"\\boxed{{{wrong}}}")
    assert reward == 0.0 and info["correct"] is False
    env.reset(seed=4)
    obs, reward, terminated, _, info = env.step(env.unwrapped.example["answer"])
    assert reward == 0.0 and terminated and info["format_error"] and "\\boxed{}" in obs


def test_describe_states_the_givens():
    plain, described = GeometryFiguresEnv("easy"), GeometryFiguresEnv("easy", describe=True)
    a, b = plain.reset(seed=5)[0], described.reset(seed=5)[0]
    assert a.images == b.images and b.text.startswith(described.example["givens"]) and b.text.endswith(a.text)


# ---- check_env and wrappers -------------------------------------------------------------------------
def test_check_env_on_chat_messages_of_images():
    env = ChatMessages(gem_core.make(IDS[1]), system_prompt="Solve it.")
    gem_core.check_env(env, seed=3)
    messages, _ = env.reset(seed=3)
    assert messages[1]["content"][0]["type"] == "image"
    messages, *_ = env.step("\\boxed{1}")
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert isinstance(messages[3]["content"], str)


class NoisyFigureEnv(DatasetEnv):
    """Same text every time, but a figure with random pixels: check_env must see the difference."""

    def __init__(self):
        super().__init__([{"q": "Find x."}])

    def _prompt(self, example):
        import os

        return MultimodalObservation.from_images(example["q"], [Image.frombytes("L", (4, 4), os.urandom(16))])

    def _grade(self, action):
        return 0.0, "Incorrect.", {}

    def _random_answer(self):
        return "\\boxed{1}"


def test_check_env_compares_images_not_just_text():
    with pytest.raises(EnvCheckError, match="differ"):
        gem_core.check_env(NoisyFigureEnv())
    with pytest.raises(EnvCheckError, match="differ"):
        gem_core.check_env(ChatMessages(NoisyFigureEnv()))


@pytest.mark.parametrize(
    "wrap",
    [ConcatObservations, ObservationActionHistory, LastKTurns, lambda e: ContextBudget(e, max_chars=100)],
    ids=["ConcatObservations", "ObservationActionHistory", "LastKTurns", "ContextBudget"],
)
def test_text_only_wrappers_refuse_images(wrap):
    env = wrap(gem_core.make(IDS[0]))
    with pytest.raises(TypeError, match="MultimodalObservation") as excinfo:
        env.reset(seed=0)
    assert type(env).__name__ in str(excinfo.value) and "ChatMessages" in str(excinfo.value)


def test_chat_template_refuses_images():
    pytest.importorskip("transformers")
    from gem_adapters.runtime.models import load_tokenizer

    env = ChatTemplate(gem_core.make(IDS[0]), load_tokenizer("smollm2"))
    with pytest.raises(TypeError, match="ChatTemplate renders text only"):
        env.reset(seed=0)


def test_vector_env_in_worker_processes_carries_images():
    vec = gem_core.make_vec(IDS[0], 2, backend="processes", autoreset_mode="disabled")
    try:
        obs, _ = vec.reset(seed=[8, 9])
        assert obs[0] == gem_core.make(IDS[0]).reset(seed=8)[0]
        assert obs[1] == gem_core.make(IDS[0]).reset(seed=9)[0]
    finally:
        vec.close()


# ---- the package --------------------------------------------------------------------------------------
def test_the_package_exports_what_the_single_module_did_and_registers_its_ids():
    import gem_core.envs.geometry as geometry

    public = {
        "DEGREE", "EASY", "FIND_ANGLE", "HARD", "IMAGE_SIZE", "LEVELS", "POLYGON_NAMES", "REGULAR",
        "RELATIONS", "SECTOR_ANGLES", "TRIPLES", "Figure", "GeometryFiguresEnv", "Made", "Point",
        "VisualMathEnv", "make_problem",
    }  # fmt: skip
    makers = {maker.__name__ for maker in (*geometry.EASY, *geometry.HARD)}
    assert set(geometry.__all__) == public | makers
    assert all(getattr(geometry, maker) in (*geometry.EASY, *geometry.HARD) for maker in makers)
    assert gem_core.list_envs("math:Geometry*") == [
        "math:Geometry3K",
        "math:GeometryFigures-v0",
        "math:GeometryFigures-v0-easy",
        "math:GeometryFigures-v0-hard",
    ]
    assert gem_core.registry.spec(IDS[0]).entry_point == "gem_core.envs.geometry:GeometryFiguresEnv"


# ---- the Geometry3K Hub id --------------------------------------------------------------------------
def test_geometry3k_fails_fast_offline_with_advice(hub_unreachable):
    pytest.importorskip("datasets")
    assert gem_core.spec("math:Geometry3K").data_source == "hub"
    start = time.monotonic()
    with pytest.raises(DatasetUnavailableError) as excinfo:
        gem_core.make("math:Geometry3K")
    assert time.monotonic() - start < 10
    assert "axon-rl/geometry3k" in str(excinfo.value) and "data_files=" in str(excinfo.value)


def test_geometry3k_loads_a_local_parquet_with_an_image_column(tmp_path):
    datasets = pytest.importorskip("datasets")
    figures = [Image.new("RGB", (40, 30), color) for color in ("white", "yellow")]
    rows = {
        "images": [[figures[0]], [figures[1]]],
        "problem": ["<image>Find x.", "<image>Find y if x = 2."],
        "answer": ["3", "\\frac{1}{2}"],
    }
    features = datasets.Features(
        {
            "images": datasets.Sequence(datasets.Image()),
            "problem": datasets.Value("string"),
            "answer": datasets.Value("string"),
        }
    )
    path = tmp_path / "geometry3k.parquet"
    datasets.Dataset.from_dict(rows, features=features).to_parquet(str(path))
    env = gem_core.make("math:Geometry3K", data_files=str(path))
    obs, _ = env.reset(index=1)
    assert isinstance(obs, MultimodalObservation) and obs.text.startswith("Find y if x = 2.")
    assert "<image>" not in obs.text and obs.pil_images()[0].tobytes() == figures[1].tobytes()
    assert env.step("\\boxed{0.5}")[1] == 1.0
    gem_core.check_env(env)
