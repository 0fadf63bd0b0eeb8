"""Logic: RuleTaker-style deduction. Facts and rules in English in, True / False / Unknown out.

A theory is a few facts ("The bear is big.", "The cat chases the dog.", "Anne is not red.") and rules
("If something is big and it chases the cat then it is kind.", "All red people are nice."). The
question asks whether one statement follows:

* open world (default): a statement is True if it can be proved, False if its negation can be proved,
  otherwise Unknown. Facts and rule conclusions may be negative; a negative condition such as
  "not red" needs a proof of "not red".
* closed world (``closed_world=True``, ids ``...-cwa``): what cannot be proved is false (negation as
  failure); facts and conclusions are positive, and the answer is True or False.

Problems are generated on demand from a seed (``reset(index=i)`` always gives problem ``i``) and the
gold answers come from ``forward_chain``, a small stratified Datalog solver that also gives each
proved literal its proof depth (the number of rule applications on the longest branch of its
shortest proof). ``depth=d`` asks only questions whose proof has depth exactly ``d``; Unknown answers
(open world) have no proof. Labels are drawn uniformly.

| event                                              | reward |
|----------------------------------------------------|--------|
| ``\\boxed{True|False|Unknown}`` matches the answer | 1.0    |
| wrong label                                        | 0.0    |
| no ``\\boxed{}``, or not one of the labels         | 0.0 (``format_error``) |

Ids: ``logic:RuleTaker-v0-d1``, ``-d2``, ``-d3`` (open world) and ``logic:RuleTaker-v0-d1-cwa`` ...
``-d3-cwa``; the reference GEM's Hub sets ``logic:RuleTaker-d0`` ... ``-d5`` (``axon-rl/RuleTaker-d*-70k``)
load through ``datasets`` as QA envs with ``\\boxed{}`` answers.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gem_core.envs.dataset import DatasetEnv
from gem_core.parsing import extract_boxed, extract_tag, preview
from gem_core.registry import register

VARIABLE = "X"
PEOPLE = ("Anne", "Bob", "Charlie", "Dave", "Erin", "Fiona", "Gary", "Harry")
ANIMALS = ("bear", "cat", "cow", "dog", "lion", "mouse", "rabbit", "squirrel", "tiger")
ATTRIBUTES = ("big", "blue", "cold", "furry", "green", "kind", "nice", "quiet", "red", "rough", "round", "smart", "white", "young")  # fmt: skip
RELATIONS = {
    "people": ("likes", "sees", "visits"),
    "animals": ("chases", "eats", "likes", "needs", "sees", "visits"),
}

Atom = tuple[str, tuple[str, ...]]  # (predicate, arguments); an argument may be VARIABLE in a rule
Literal = tuple[Atom, bool]  # (atom, positive)


@dataclass(frozen=True)
class Rule:
    conditions: tuple[Literal, ...]
    conclusion: Literal


@dataclass(frozen=True)
class Theory:
    entities: tuple[str, ...]
    facts: tuple[Literal, ...]
    rules: tuple[Rule, ...]


class UnstratifiableError(ValueError):
    """Closed-world negation through a cycle of rules: the theory has no single meaning."""


# ---- the solver -----------------------------------------------------------------------------------
def negate(literal: Literal) -> Literal:
    return literal[0], not literal[1]


def ground(theory: Theory) -> list[Rule]:
    """Every rule with its variable replaced by each entity (rules without the variable stay as they are)."""
    grounded = []
    for rule in theory.rules:
        mentions_variable = any(VARIABLE in atom[1] for atom, _ in (*rule.conditions, rule.conclusion))
        for entity in theory.entities if mentions_variable else (None,):

            def bind(literal: Literal, entity: str | None = entity) -> Literal:
                (predicate, args), positive = literal
                return (predicate, tuple(entity if a == VARIABLE else a for a in args)), positive

            grounded.append(Rule(tuple(bind(c) for c in rule.conditions), bind(rule.conclusion)))
    return grounded


def strata(rules: Iterable[Rule]) -> dict[str, int]:
    """Closed-world strata of the predicates: a predicate depending negatively on another is higher."""
    level: dict[str, int] = {}
    rules = list(rules)
    predicates = {atom[0] for rule in rules for atom, _ in (*rule.conditions, rule.conclusion)}
    for _ in range(len(predicates) + 1):
        changed = False
        for rule in rules:
            head = rule.conclusion[0][0]
            for (predicate, _), positive in rule.conditions:
                needed = level.get(predicate, 0) + (0 if positive else 1)
                if level.get(head, 0) < needed:
                    level[head] = needed
                    changed = True
        if not changed:
            return level
    raise UnstratifiableError("negation as failure through a cycle of rules")


def forward_chain(theory: Theory, closed_world: bool = False) -> dict[Literal, int]:
    """Every literal the theory proves, with the depth of its shallowest proof (facts have depth 0).

    Open world: conditions (positive or negative) must be proved. Closed world: a negative condition
    holds when its atom cannot be proved (it adds no depth); only positive literals are returned.
    """
    depth: dict[Literal, int] = {fact: 0 for fact in theory.facts}
    rules = ground(theory)
    if not closed_world:
        _relax(rules, depth, lambda literal: depth.get(literal))
        return depth
    if any(not positive for _, positive in theory.facts) or any(not r.conclusion[1] for r in rules):
        raise ValueError("closed-world theories have positive facts and conclusions only")
    levels = strata(rules)
    for level in sorted({levels.get(r.conclusion[0][0], 0) for r in rules}):
        layer = [r for r in rules if levels.get(r.conclusion[0][0], 0) == level]

        def holds(literal: Literal) -> int | None:
            if literal[1]:
                return depth.get(literal)
            return None if (literal[0], True) in depth else 0  # lower strata are complete

        _relax(layer, depth, holds)
    return depth


def _relax(rules: list[Rule], depth: dict[Literal, int], holds: Any) -> None:
    """Apply ``rules`` until no literal is added and no proof gets shallower."""
    changed = True
    while changed:
        changed = False
        for rule in rules:
            found = [holds(condition) for condition in rule.conditions]
            if any(d is None for d in found):
                continue
            new = 1 + max(found, default=0)
            if new < depth.get(rule.conclusion, new + 1):
                depth[rule.conclusion] = new
                changed = True


def answer(theory: Theory, statement: Literal, closed_world: bool = False) -> tuple[str, int | None]:
    """The label of ``statement`` (``"True"``, ``"False"`` or ``"Unknown"``) and its proof depth."""
    return answer_from(forward_chain(theory, closed_world), statement, closed_world)


def answer_from(proved: dict[Literal, int], statement: Literal, closed_world: bool) -> tuple[str, int | None]:
    """``answer`` given the solver's output, so that a theory is solved once for many statements.

    Closed world: an unprovable statement is False (and its negation True) with depth 0.
    """
    if closed_world:
        atom_depth = proved.get((statement[0], True))
        if atom_depth is None:
            return ("False", 0) if statement[1] else ("True", 0)
        return ("True", atom_depth) if statement[1] else ("False", atom_depth)
    if statement in proved:
        return "True", proved[statement]
    if negate(statement) in proved:
        return "False", proved[negate(statement)]
    return "Unknown", None


# ---- English ----------------------------------------------------------------------------------------
def _name(entity: str) -> str:
    return entity if entity in PEOPLE else f"the {entity}"


def _predicate(literal: Literal, plural: bool = False) -> str:
    """The verb phrase of ``literal``: "is big", "are not big", "chases the cat", "do not like Bob"."""
    (predicate, args), positive = literal
    if len(args) == 1:
        return f"{'are' if plural else 'is'}{'' if positive else ' not'} {predicate}"
    base = predicate.removesuffix("s")  # likes -> like, chases -> chase
    if positive:
        verb = base if plural else predicate
    else:
        verb = f"{'do' if plural else 'does'} not {base}"
    return f"{verb} {_name(args[1])}"


def _sentence(text: str) -> str:
    return text[0].upper() + text[1:] + "."


def render_literal(literal: Literal) -> str:
    return _sentence(f"{_name(literal[0][1][0])} {_predicate(literal)}")


def render_rule(rule: Rule, people: bool) -> str:
    """A rule in RuleTaker's phrasing: "If someone is big and they like Bob then they are kind."."""
    conclusion = rule.conclusion
    if VARIABLE not in conclusion[0][1]:
        conditions = " and ".join(f"{_name(c[0][1][0])} {_predicate(c)}" for c in rule.conditions)
        return _sentence(f"if {conditions} then {_name(conclusion[0][1][0])} {_predicate(conclusion)}")
    (only, *more) = rule.conditions
    if not more and only[1] and len(only[0][1]) == 1 and conclusion[1]:
        return _sentence(f"all {only[0][0]} {'people' if people else 'things'} are {conclusion[0][0]}")
    someone, pronoun = ("someone", "they") if people else ("something", "it")
    clauses = []
    for i, condition in enumerate(rule.conditions):
        subject = condition[0][1][0]
        if subject != VARIABLE:
            clauses.append(f"{_name(subject)} {_predicate(condition)}")
        elif i == 0:
            clauses.append(f"{someone} {_predicate(condition)}")
        else:
            clauses.append(f"{pronoun} {_predicate(condition, plural=people)}")
    return _sentence(f"if {' and '.join(clauses)} then {pronoun} {_predicate(conclusion, plural=people)}")


def render_theory(theory: Theory, order: list[int]) -> str:
    """Facts and rules as one paragraph, in the given order of ``facts + rules``."""
    people = theory.entities[0] in PEOPLE
    sentences = [render_literal(f) for f in theory.facts] + [render_rule(r, people) for r in theory.rules]
    return " ".join(sentences[i] for i in order)


# ---- the generator ----------------------------------------------------------------------------------
def generate_problem(rng: random.Random, depth: int, closed_world: bool = False) -> dict[str, Any]:
    """A theory and a statement whose answer needs a proof of exactly ``depth`` rule applications."""
    labels = ("True", "False") if closed_world else ("True", "False", "Unknown")
    label = rng.choice(labels)
    for _ in range(1_000):
        theory = _random_theory(rng, depth, closed_world)
        proved = forward_chain(theory, closed_world)
        if not closed_world and any(negate(literal) in proved for literal in proved):
            continue  # contradictory theory
        candidates = [
            s for s in _statements(theory) if answer_from(proved, s, closed_world) == (label, depth)
        ]
        if label == "Unknown":
            candidates = [
                s for s in _statements(theory) if answer_from(proved, s, closed_world)[0] == "Unknown"
            ]
        if not candidates:
            continue
        statement = rng.choice(candidates)
        order = list(range(len(theory.facts) + len(theory.rules)))
        rng.shuffle(order)
        return {
            "theory": theory,
            "text": render_theory(theory, order),
            "statement": statement,
            "question": render_literal(statement),
            "answer": label,
            "depth": depth,
            "closed_world": closed_world,
        }
    raise RuntimeError(f"could not generate a depth-{depth} problem with answer {label}")


def _statements(theory: Theory) -> list[Literal]:
    attributes = sorted({atom[0] for atom, _ in _literals(theory) if len(atom[1]) == 1})
    return [((a, (e,)), positive) for e in theory.entities for a in attributes for positive in (True, False)]


def _literals(theory: Theory) -> list[Literal]:
    return [*theory.facts, *(lit for r in theory.rules for lit in (*r.conditions, r.conclusion))]


def _random_theory(rng: random.Random, depth: int, closed_world: bool) -> Theory:
    people = rng.random() < 0.5
    entities = tuple(rng.sample(PEOPLE if people else ANIMALS, rng.randint(3, 4)))
    attributes = rng.sample(ATTRIBUTES, 7)  # rules only conclude attributes later in this order
    relations = RELATIONS["people" if people else "animals"]
    negative_share = 0.0 if closed_world else 0.3

    def attribute_literal(index: int, subject: str, allow_negative: bool = True) -> Literal:
        return (attributes[index], (subject,)), not (allow_negative and rng.random() < negative_share)

    facts: set[Literal] = set()
    rules: list[Rule] = []
    # A planted chain, so that a proof of the wanted depth usually exists.
    chain = sorted(rng.sample(range(len(attributes)), depth + 1))
    start = rng.choice(entities)
    facts.add(((attributes[chain[0]], (start,)), True))
    for i in range(1, depth + 1):
        conclusion = attribute_literal(chain[i], VARIABLE, allow_negative=i == depth)
        rules.append(Rule((((attributes[chain[i - 1]], (VARIABLE,)), True),), conclusion))
    for _ in range(rng.randint(3, 6)):
        facts.add(attribute_literal(rng.randrange(len(attributes)), rng.choice(entities)))
    for _ in range(rng.randint(1, 3)):
        a, b = rng.sample(entities, 2)
        facts.add(((rng.choice(relations), (a, b)), True))
    for _ in range(rng.randint(2, 4)):
        head = rng.randrange(1, len(attributes))
        subject = VARIABLE if rng.random() < 0.7 else rng.choice(entities)
        conditions = []
        for _ in range(rng.randint(1, 2)):
            if rng.random() < 0.75:  # negative conditions: negation as failure, or a proved negation
                literal = (attributes[rng.randrange(head)], (subject,)), rng.random() >= 0.25
            else:
                other = rng.choice([e for e in entities if e != subject])
                literal = (rng.choice(relations), (subject, other)), True
            if literal not in conditions:
                conditions.append(literal)
        rules.append(Rule(tuple(conditions), attribute_literal(head, subject)))
    return Theory(entities, tuple(sorted(facts)), tuple(dict.fromkeys(rules)))


class _Problems:
    """Problem ``i`` of a depth and world, generated on demand from its own seed."""

    def __init__(self, depth: int, closed_world: bool, seed: int, size: int = 2**31):
        self.depth, self.closed_world, self.seed, self.size = depth, closed_world, seed, size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> dict[str, Any]:
        rng = random.Random(f"ruletaker:{self.seed}:{self.depth}:{self.closed_world}:{index}")
        return generate_problem(rng, self.depth, self.closed_world)


# ---- the env --------------------------------------------------------------------------------------
class LogicEnv(DatasetEnv):
    """Single-turn RuleTaker-style questions, generated on demand."""

    def __init__(self, depth: int = 1, closed_world: bool = False, problem_seed: int = 0):
        if not 0 <= depth <= 6:
            raise ValueError("depth is between 0 and 6")
        super().__init__(_Problems(depth, closed_world, problem_seed))
        self.labels = ("True", "False") if closed_world else ("True", "False", "Unknown")

    def _prompt(self, example: Any) -> str:
        if example["closed_world"]:
            world = "Assume a closed world: a statement that cannot be proved from the theory is false."
        else:
            world = "A statement is Unknown if neither it nor its negation can be proved from the theory."
        options = ", ".join(self.labels[:-1]) + f" or {self.labels[-1]}"
        return (
            f"Theory: {example['text']}\n\n{world}\nIs the following statement {options}?\n"
            f"Statement: {example['question']}\nGive your answer inside \\boxed{{}}, for example \\boxed{{True}}."
        )

    def _grade(self, action: str) -> tuple[float, str, dict[str, Any]]:
        text = extract_boxed(action)
        if text is None:
            text = extract_tag(action, "answer")
        label = {lab.lower(): lab for lab in self.labels}.get((text or "").strip().strip(".").lower())
        if label is None:
            feedback = (
                f"No answer found: reply with one of {', '.join(self.labels)} inside \\boxed{{}}. "
                f"Your reply was: {preview(action) or '(empty)'}"
            )
            return 0.0, feedback, {"format_error": True}
        correct = label == self.example["answer"]
        info = {"correct": correct, "depth": self.example["depth"]}
        if correct:
            return 1.0, "Correct.", info
        return 0.0, f"Incorrect: the statement is not {label}.", info

    def _random_answer(self) -> str:
        return f"\\boxed{{{self.action_rng.choice(self.labels)}}}"


def _register() -> None:
    for depth in (1, 2, 3):
        for suffix, closed in (("", False), ("-cwa", True)):
            register(
                f"logic:RuleTaker-v0-d{depth}{suffix}",
                "gem_core.envs.logic:LogicEnv",
                description=f"generated depth-{depth} deduction, {'closed' if closed else 'open'} world",
                multi_turn=False,
                depth=depth,
                closed_world=closed,
            )
    for depth in (0, 1, 2, 3, 5):
        register(
            f"logic:RuleTaker-d{depth}",
            "gem_core.envs.qa:QAEnv",
            description=f"axon-rl/RuleTaker-d{depth}-70k (the reference GEM's)",
            multi_turn=False,
            data_source="hub",
            dataset_name=f"axon-rl/RuleTaker-d{depth}-70k",
            split="train",
            answer_format="boxed",
        )


_register()
