"""Logic envs: the forward-chaining solver, the generator (cross-checked by backward chaining), the env."""

import collections
import functools
import random
import time

import pytest

import gem_core
from gem_core.envs.dataset import DatasetUnavailableError
from gem_core.envs.logic import (
    VARIABLE,
    Rule,
    Theory,
    UnstratifiableError,
    answer,
    forward_chain,
    generate_problem,
    ground,
    render_literal,
    render_rule,
)

X = VARIABLE
OFFLINE_IDS = [i for i in gem_core.list_envs("logic:*") if gem_core.spec(i).data_source == "offline"]


def lit(predicate, *args, positive=True):
    return (predicate, tuple(args)), positive


def rule(conclusion, *conditions):
    return Rule(tuple(conditions), conclusion)


# ---- the solver on hand-made theories ---------------------------------------------------------------
OPEN = Theory(
    entities=("Anne", "Bob"),
    facts=(lit("big", "Anne"), lit("likes", "Bob", "Anne"), lit("red", "Bob", positive=False)),
    rules=(
        rule(lit("red", X), lit("big", X)),
        rule(lit("kind", X), lit("big", X), lit("red", X)),
        rule(lit("young", X, positive=False), lit("red", X)),
        rule(lit("nice", X), lit("likes", X, "Anne"), lit("red", X, positive=False)),
    ),
)


@pytest.mark.parametrize(
    ("statement", "label", "depth"),
    [
        (lit("big", "Anne"), "True", 0),
        (lit("red", "Anne"), "True", 1),
        (lit("kind", "Anne"), "True", 2),
        (lit("young", "Anne"), "False", 2),
        (lit("young", "Anne", positive=False), "True", 2),
        (lit("kind", "Anne", positive=False), "False", 2),
        (lit("quiet", "Anne"), "Unknown", None),
        (lit("nice", "Bob"), "True", 1),  # a proved negative condition
        (lit("nice", "Anne"), "Unknown", None),  # "not red" is not proved for Anne
        (lit("kind", "Bob"), "Unknown", None),
    ],
)
def test_open_world_answers_and_depths(statement, label, depth):
    assert answer(OPEN, statement) == (label, depth)


CLOSED = Theory(
    entities=("Anne", "Bob"),
    facts=(lit("big", "Anne"), lit("young", "Bob")),
    rules=(
        rule(lit("quiet", X), lit("young", X, positive=False)),
        rule(lit("nice", X), lit("quiet", X), lit("big", X)),
        rule(lit("cold", X), lit("nice", X, positive=False), lit("young", X)),
    ),
)


@pytest.mark.parametrize(
    ("statement", "label", "depth"),
    [
        (lit("quiet", "Anne"), "True", 1),
        (lit("nice", "Anne"), "True", 2),
        (lit("young", "Anne"), "False", 0),
        (lit("young", "Anne", positive=False), "True", 0),
        (lit("quiet", "Bob"), "False", 0),
        (lit("cold", "Bob"), "True", 1),  # negation as failure of a derived predicate (two strata)
        (lit("cold", "Anne", positive=False), "True", 0),
        (lit("nice", "Anne", positive=False), "False", 2),
    ],
)
def test_closed_world_answers_and_depths(statement, label, depth):
    assert answer(CLOSED, statement, closed_world=True) == (label, depth)


def test_shortest_proof_and_recursion():
    theory = Theory(
        entities=("Anne", "Bob", "Charlie"),
        facts=(lit("big", "Anne"),),
        rules=(
            rule(lit("red", X), lit("big", X)),
            rule(lit("kind", X), lit("red", X)),
            rule(lit("kind", X), lit("big", X)),  # a shorter proof of the same conclusion
            rule(lit("big", "Bob"), lit("kind", "Anne")),
            rule(lit("big", "Charlie"), lit("big", "Bob")),
            rule(lit("big", "Anne"), lit("big", "Charlie")),  # a cycle back to a fact
        ),
    )
    proved = forward_chain(theory)
    assert proved[lit("kind", "Anne")] == 1
    assert proved[lit("big", "Bob")] == 2 and proved[lit("big", "Charlie")] == 3
    assert proved[lit("big", "Anne")] == 0 and proved[lit("kind", "Charlie")] == 4


def test_closed_world_rejects_what_it_cannot_mean():
    cyclic = Theory(
        ("Anne",),
        (),
        (rule(lit("p", X), lit("q", X, positive=False)), rule(lit("q", X), lit("p", X, positive=False))),
    )
    with pytest.raises(UnstratifiableError):
        forward_chain(cyclic, closed_world=True)
    with pytest.raises(ValueError):
        forward_chain(Theory(("Anne",), (lit("big", "Anne", positive=False),), ()), closed_world=True)


def test_ground_binds_the_variable_to_every_entity():
    grounded = ground(OPEN)
    assert len(grounded) == 2 * len(OPEN.rules)
    assert rule(lit("red", "Bob"), lit("big", "Bob")) in grounded


# ---- English --------------------------------------------------------------------------------------
def test_rendering():
    assert render_literal(lit("big", "Anne", positive=False)) == "Anne is not big."
    assert render_literal(lit("chases", "bear", "cat")) == "The bear chases the cat."
    assert render_rule(rule(lit("red", X), lit("big", X)), people=True) == "All big people are red."
    two = rule(lit("kind", X, positive=False), lit("big", X), lit("likes", X, "Bob"))
    assert render_rule(two, people=True) == "If someone is big and they like Bob then they are not kind."
    animal = rule(lit("big", X), lit("chases", X, "cat", positive=False), lit("red", X))
    assert (
        render_rule(animal, people=False)
        == "If something does not chase the cat and it is red then it is big."
    )
    specific = rule(lit("round", "Anne"), lit("nice", "Anne"), lit("sees", "Anne", "Bob"))
    assert render_rule(specific, people=True) == "If Anne is nice and Anne sees Bob then Anne is round."


# ---- the generator, checked against an independent backward-chaining prover -------------------------
def backward_answer(theory, statement, closed_world):
    rules = ground(theory)
    limit = len(rules) + 1  # no shortest proof is deeper than the number of rules

    @functools.cache
    def provable(literal, k):
        if literal in theory.facts:
            return True
        if k == 0:
            return False
        for r in rules:
            if r.conclusion != literal:
                continue
            if all(
                not provable((c[0], True), limit) if closed_world and not c[1] else provable(c, k - 1)
                for c in r.conditions
            ):
                return True
        return False

    def shallowest(literal):
        return next((k for k in range(limit + 1) if provable(literal, k)), None)

    atom, positive = statement
    if closed_world:
        d = shallowest((atom, True))
        if d is None:
            return ("False", 0) if positive else ("True", 0)
        return ("True", d) if positive else ("False", d)
    if (d := shallowest(statement)) is not None:
        return "True", d
    if (d := shallowest((atom, not positive))) is not None:
        return "False", d
    return "Unknown", None


@pytest.mark.parametrize("closed_world", [False, True])
@pytest.mark.parametrize("depth", [1, 2, 3])
def test_generated_problems_are_right(depth, closed_world):
    labels = collections.Counter()
    for seed in range(40):
        problem = generate_problem(random.Random(seed), depth, closed_world)
        label, proof_depth = backward_answer(problem["theory"], problem["statement"], closed_world)
        assert label == problem["answer"], problem["text"]
        assert proof_depth == (None if label == "Unknown" else depth), problem["text"]
        labels[label] += 1
        for sentence in problem["text"].split(". "):
            assert sentence[0].isupper()
    expected = {"True", "False"} if closed_world else {"True", "False", "Unknown"}
    assert set(labels) == expected and min(labels.values()) >= 8, labels


# ---- the env --------------------------------------------------------------------------------------
def test_right_and_wrong_labels():
    env = gem_core.make("logic:RuleTaker-v0-d2")
    for seed in range(6):
        obs, _ = env.reset(seed=seed)
        gold = env.unwrapped.example["answer"]
        assert (
            env.unwrapped.example["text"] in obs
            and env.unwrapped.example["question"] in obs
            and "Unknown" in obs
        )
        _, reward, terminated, truncated, info = env.step(f"It follows. \\boxed{{{gold.lower()}}}")
        assert (reward, terminated, truncated) == (1.0, True, False) and info["depth"] == 2
        env.reset(seed=seed)
        wrong = next(label for label in ("True", "False", "Unknown") if label != gold)
        assert env.step(f"\\boxed{{{wrong}}}")[1] == 0.0


@pytest.mark.parametrize("reply", ["True", "\\boxed{Maybe}", "\\boxed{}", "<answer></answer>"])
def test_bad_replies_are_format_errors(reply):
    env = gem_core.make("logic:RuleTaker-v0-d1")
    env.reset(seed=0)
    obs, reward, terminated, _, info = env.step(reply)
    assert reward == 0.0 and terminated and info["format_error"] and "\\boxed{}" in obs


def test_closed_world_env_never_asks_unknown():
    env = gem_core.make("logic:RuleTaker-v0-d3-cwa")
    answers = collections.Counter()
    for index in range(60):
        obs, _ = env.reset(index=index)
        answers[env.unwrapped.example["answer"]] += 1
        assert "closed world" in obs and "Unknown" not in obs
    assert set(answers) == {"True", "False"}
    env.reset(index=0)
    assert env.step("\\boxed{Unknown}")[4]["format_error"]


def test_problems_depend_only_on_the_index_and_spawn_shares_them():
    env = gem_core.make("logic:RuleTaker-v0-d3")
    assert env.reset(index=12345)[0] == gem_core.make("logic:RuleTaker-v0-d3").reset(index=12345)[0]
    env.reset(seed=4)
    clone = env.spawn(same_state=True)
    assert clone.unwrapped.example["text"] == env.unwrapped.example["text"]
    assert clone.step(f"\\boxed{{{env.unwrapped.example['answer']}}}")[1] == 1.0


@pytest.mark.parametrize("env_id", OFFLINE_IDS)
def test_check_env(env_id):
    gem_core.check_env(gem_core.make(env_id))


def test_reference_hub_ids_fail_fast_offline():
    pytest.importorskip("datasets")
    assert len(OFFLINE_IDS) == 6
    assert gem_core.spec("logic:RuleTaker-d3").data_source == "hub"
    start = time.monotonic()
    with pytest.raises(DatasetUnavailableError, match="data_files="):
        gem_core.make("logic:RuleTaker-d3")
    assert time.monotonic() - start < 10
