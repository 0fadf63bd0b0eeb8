"""Customer service in the spirit of tau-bench retail: a support agent, a customer, an orders database.

Two agents take turns: the ``user`` (a customer with a goal, see ``retail_data.SCENARIOS``) speaks
first; the ``agent`` answers. An agent reply is either a tool call,
``<tool_call>{"name": "cancel_order", "arguments": {"order_id": "W1001", "reason": "..."}}</tool_call>``
(the same format as ``gem_core.tools.mcp``; the result comes back to the agent, who keeps the turn),
or a plain-text message to the customer (the turn passes). The customer ends the conversation by
writing ``###STOP###``. Tools:

``find_customer(email)``                the customer id; authenticates that customer for the episode
``list_orders(customer_id)``            their orders with status and items
``get_order(order_id)``                 one order in full
``cancel_order(order_id, reason)``      pending orders only; reason "no longer needed" or "ordered by mistake"
``modify_address(order_id, address)``   pending or processing orders only
``return_items(order_id, items)``       delivered orders only; items by name

Every tool but ``find_customer`` needs the order's customer authenticated first.

| event                                                        | agent's reward               |
|--------------------------------------------------------------|------------------------------|
| the conversation ends (``###STOP###`` or ``max_turns`` agent | 1.0 iff solved (below),      |
| replies)                                                     | else 0.0                     |
| an empty reply or a malformed tool call                      | -0.1 (the agent keeps the    |
|                                                              | turn)                        |

Solved (``solved``): the final database equals the scenario's goal state, the agent authenticated the
scenario's customer, and it looked up (``get_order``, or ``list_orders`` of their customer) every order
the scenario's ``verify`` names. Without the last two, a scenario whose goal is to change nothing (a
refusal) would pay any reply that makes the customer leave: an RL policy found that, writing a junk
"cannot" and ending the chat at its first turn.

The customer gets the same final reward (they cooperate). ``scripted_user`` plays the customer from
its observation alone (the scenario id and the conversation so far), answering by keywords;
``llm_user(generate)`` lets a chat model play it instead. ``customer_service(...)`` builds the
single-agent view registered as ``multiagent:CustomerService-v0``.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterable
from typing import Any

from gem_core.envs.multiagent.core import MultiAgentEnv, MultiStepResult, Policy
from gem_core.envs.multiagent.retail_data import DATABASE, SCENARIOS
from gem_core.envs.multiagent.single_agent import SingleAgentView
from gem_core.parsing import preview
from gem_core.tools.mcp import parse_tool_call

STOP = "###STOP###"
FORMAT_PENALTY = -0.1
MAX_MESSAGE_CHARS = 2_000
MAX_RESULT_CHARS = 4_000
CANCEL_REASONS = ("no longer needed", "ordered by mistake")

POLICY = """You are the customer-service agent of an online shop. Follow this policy:
- Before looking anything up or changing anything, authenticate the customer: ask for the email on their account and call find_customer.
- Only pending orders can be cancelled, with the customer's reason: "no longer needed" or "ordered by mistake".
- The shipping address can be changed only for pending or processing orders.
- Items can be returned only from delivered orders.
- Before any change, describe it and get the customer's explicit yes. Never change anything they did not ask for.

Each reply is either one tool call, <tool_call>{"name": "...", "arguments": {...}}</tool_call> (you see its result and keep the turn), or one message to the customer in plain text.
Tools:
- find_customer(email: str): the customer's id and name
- list_orders(customer_id: str): the customer's orders, with status and items
- get_order(order_id: str): one order: status, address, items and prices
- cancel_order(order_id: str, reason: str): cancel a pending order
- modify_address(order_id: str, address: str): change the shipping address of a pending or processing order
- return_items(order_id: str, items: list[str]): return items (by name) of a delivered order"""

USER_PROMPT = (
    "You are a customer of an online shop, chatting with its support agent. Say what you want one "
    "request at a time; give details (email, order, reason, address, items) only when asked. When "
    f"everything you wanted is done, or cannot be done, thank the agent and end with {STOP}."
)


class ToolError(Exception):
    """A tool call the shop refuses; its message goes back to the agent."""


class Shop:
    """The orders database and its tools (plain dicts, deep-copyable for snapshots)."""

    def __init__(self, db: dict[str, Any]):
        self.db = copy.deepcopy(db)
        self.authenticated: list[str] = []
        self.looked_up: list[str] = []  # order ids whose details a tool returned

    def call(self, name: str, arguments: dict[str, Any], check_auth: bool = True) -> Any:
        tool = self.TOOLS.get(name)
        if tool is None:
            raise ToolError(f"unknown tool {name!r}; the tools are {', '.join(self.TOOLS)}")
        function, params = tool
        missing = [p for p in params if p not in arguments]
        extra = [a for a in arguments if a not in params]
        if missing or extra:
            raise ToolError(f"{name} takes ({', '.join(params)}); missing {missing}, unexpected {extra}")
        for param in params:
            wanted = list if param == "items" else str
            if not isinstance(arguments[param], wanted) or (
                wanted is list and not all(isinstance(i, str) for i in arguments[param])
            ):
                raise ToolError(f"{param} must be {'a list of strings' if wanted is list else 'a string'}")
        return function(self, check_auth, **arguments)

    def _order(self, order_id: str, check_auth: bool) -> dict[str, Any]:
        order = self.db["orders"].get(order_id.strip().lstrip("#").upper())
        if order is None:
            raise ToolError(f"no order {order_id!r}")
        if check_auth and order["customer_id"] not in self.authenticated:
            raise ToolError("authenticate the order's customer first (find_customer with their email)")
        return order

    def find_customer(self, check_auth: bool, email: str) -> dict[str, str]:
        for customer_id, customer in self.db["customers"].items():
            if customer["email"] == email.strip().lower():
                if customer_id not in self.authenticated:
                    self.authenticated.append(customer_id)
                return {"customer_id": customer_id, "name": customer["name"]}
        raise ToolError(f"no customer with the email {email!r}")

    def list_orders(self, check_auth: bool, customer_id: str) -> list[dict[str, Any]]:
        if customer_id not in self.db["customers"]:
            raise ToolError(f"no customer {customer_id!r}")
        if check_auth and customer_id not in self.authenticated:
            raise ToolError("authenticate the customer first (find_customer with their email)")
        orders = [
            {"order_id": oid, "status": o["status"], "items": [i["name"] for i in o["items"]]}
            for oid, o in sorted(self.db["orders"].items())
            if o["customer_id"] == customer_id
        ]
        self._looked_up(o["order_id"] for o in orders)
        return orders

    def get_order(self, check_auth: bool, order_id: str) -> dict[str, Any]:
        order = {"order_id": order_id.strip().lstrip("#").upper(), **self._order(order_id, check_auth)}
        self._looked_up([order["order_id"]])
        return order

    def _looked_up(self, order_ids: Iterable[str]) -> None:
        self.looked_up.extend(o for o in order_ids if o not in self.looked_up)

    def cancel_order(self, check_auth: bool, order_id: str, reason: str) -> dict[str, Any]:
        order = self._order(order_id, check_auth)
        if order["status"] != "pending":
            raise ToolError(f"only pending orders can be cancelled; this one is {order['status']}")
        if reason not in CANCEL_REASONS:
            raise ToolError(f"reason must be one of {list(CANCEL_REASONS)}")
        order["status"], order["cancel_reason"] = "cancelled", reason
        return {"order_id": order_id, "status": "cancelled"}

    def modify_address(self, check_auth: bool, order_id: str, address: str) -> dict[str, Any]:
        order = self._order(order_id, check_auth)
        if order["status"] not in ("pending", "processing"):
            raise ToolError(f"the address of a {order['status']} order cannot change")
        if not address.strip() or len(address) > 200:
            raise ToolError("give the new address (at most 200 characters)")
        order["address"] = address.strip()
        return {"order_id": order_id, "address": order["address"]}

    def return_items(self, check_auth: bool, order_id: str, items: list[str]) -> dict[str, Any]:
        order = self._order(order_id, check_auth)
        if order["status"] != "delivered":
            raise ToolError(f"only delivered orders can be returned; this one is {order['status']}")
        names = [i["name"] for i in order["items"]]
        wanted = sorted({item.strip().lower() for item in items})
        if not wanted or any(item not in names for item in wanted):
            raise ToolError(f"items must be some of {names}")
        order["status"], order["returned_items"] = "return requested", wanted
        return {"order_id": order_id, "status": order["status"], "returned_items": wanted}

    TOOLS: dict[str, tuple[Callable[..., Any], tuple[str, ...]]] = {
        "find_customer": (find_customer, ("email",)),
        "list_orders": (list_orders, ("customer_id",)),
        "get_order": (get_order, ("order_id",)),
        "cancel_order": (cancel_order, ("order_id", "reason")),
        "modify_address": (modify_address, ("order_id", "address")),
        "return_items": (return_items, ("order_id", "items")),
    }


def goal_database(scenario: dict[str, Any]) -> dict[str, Any]:
    """The database after the scenario's goal calls (the state a correct agent leaves)."""
    shop = Shop(DATABASE)
    for goal_call in scenario["goal"]:
        shop.call(goal_call["name"], goal_call["arguments"], check_auth=False)
    return shop.db


def solved(shop: Shop, scenario: dict[str, Any]) -> bool:
    """The scenario is done (module docstring): its goal database, its customer authenticated, and the
    orders it names in ``verify`` looked up."""
    return (
        shop.db == goal_database(scenario)
        and scenario["customer"] in shop.authenticated
        and all(order_id in shop.looked_up for order_id in scenario.get("verify", ()))
    )


class CustomerServiceEnv(MultiAgentEnv):
    """The support conversation; ``scenario`` fixes one (by id), else one is drawn per episode."""

    turn_order = "sequential"

    def __init__(self, scenario: str | None = None, max_turns: int = 30):
        ids = [s["id"] for s in SCENARIOS]
        if scenario is not None and scenario not in ids:
            raise ValueError(f"unknown scenario {scenario!r}; choose from {ids}")
        if max_turns < 1:
            raise ValueError("max_turns must be at least 1")
        self.agents = ["agent", "user"]
        self.scenario_id = scenario
        self.max_turns = max_turns
        self.scenario: dict[str, Any] = SCENARIOS[0]
        self.shop = Shop(DATABASE)
        self.transcript: list[tuple[str, str]] = []
        self.agent_turns = 0

    def _reset(self) -> tuple[dict[str, str], dict[str, dict]]:
        if self.scenario_id is None:
            self.scenario = self.rng.choice(SCENARIOS)
        else:
            self.scenario = next(s for s in SCENARIOS if s["id"] == self.scenario_id)
        self.shop = Shop(DATABASE)
        self.transcript = []
        self.agent_turns = 0
        self.current_agent = "user"
        observations = {"agent": f"{POLICY}\n\nWaiting for the customer.", "user": self._user_view()}
        return observations, {agent: {"scenario": self.scenario["id"]} for agent in self.agents}

    def _user_view(self) -> str:
        customer = DATABASE["customers"][self.scenario["customer"]]
        wants = " Then: ".join(r["say"] for r in self.scenario["requests"])
        lines = [
            f"[scenario: {self.scenario['id']}]",
            USER_PROMPT,
            f"You are {customer['name']} (email {customer['email']}). What you want: {wants}",
            "Conversation so far:",
            *(
                f"{'Customer' if who == 'user' else 'Agent'}: {' '.join(text.split())}"
                for who, text in self.transcript
            ),
            "Reply with your next message as the customer.",
        ]
        return "\n".join(lines)

    def _step(self, actions: dict[str, str]) -> MultiStepResult:
        agent = self.current_agent
        text = actions[agent]
        rewards = dict.fromkeys(self.agents, 0.0)
        infos: dict[str, dict[str, Any]] = {a: {} for a in self.agents}
        observations = {a: "" for a in self.agents}
        ended = truncated = False
        if agent == "user":
            message = text.strip()[:MAX_MESSAGE_CHARS] or "..."
            self.transcript.append(("user", message))
            observations["agent"] = f"Customer: {message}"
            if len(self.transcript) == 1:  # the customer's opening: the agent's first real observation
                observations["agent"] = f"{POLICY}\n\n{observations['agent']}"
            ended = STOP in message
            self.current_agent = "agent"
        else:
            self.agent_turns += 1
            found = parse_tool_call(text)
            if found is not None:
                observations["agent"], rewards["agent"], infos["agent"] = self._tool(found)
            elif not text.strip():
                observations["agent"] = (
                    "Your reply was empty: write a message to the customer or call a tool."
                )
                rewards["agent"], infos["agent"] = FORMAT_PENALTY, {"format_error": True}
            else:
                self.transcript.append(("agent", text.strip()[:MAX_MESSAGE_CHARS]))
                observations["agent"] = "Message sent; waiting for the customer."
                self.current_agent = "user"
            truncated = not ended and self.agent_turns >= self.max_turns
        observations["user"] = self._user_view()
        if ended or truncated:
            success = solved(self.shop, self.scenario)
            for a in self.agents:
                rewards[a] += 1.0 if success else 0.0
                infos[a].update(success=success)
            ending = (
                "The customer ended the conversation."
                if ended
                else "No turns left: the conversation is over."
            )
            observations["agent"] = f"{observations['agent']}\n{ending}".strip()
            self.current_agent = None
        terminations = dict.fromkeys(self.agents, ended)
        return observations, rewards, terminations, dict.fromkeys(self.agents, truncated), infos

    def _tool(self, found: Any) -> tuple[str, float, dict[str, Any]]:
        if found.error is not None:
            return f"Tool call error: {found.error}", FORMAT_PENALTY, {"format_error": True}
        try:
            result = self.shop.call(found.name, found.arguments)
        except ToolError as exc:
            return (
                f"Tool error ({preview(found.name, 40)}): {exc}",
                0.0,
                {"tool": found.name, "tool_ok": False},
            )
        text = json.dumps(result)
        if len(text) > MAX_RESULT_CHARS:
            text = text[:MAX_RESULT_CHARS] + " [truncated]"
        return f"Tool result ({found.name}): {text}", 0.0, {"tool": found.name, "tool_ok": True}

    def _random_action(self, agent: str) -> str:
        rng = self.action_rng
        if agent == "user":
            return rng.choice(
                ["Hi, I need help with an order.", "My email is on the account.", f"Thanks! {STOP}"]
            )
        order_id = rng.choice(sorted(DATABASE["orders"]))
        email = DATABASE["customers"][self.scenario["customer"]]["email"]
        return rng.choice(
            [
                "Could you tell me the email address on your account?",
                f'<tool_call>{{"name": "find_customer", "arguments": {{"email": "{email}"}}}}</tool_call>',
                f'<tool_call>{{"name": "get_order", "arguments": {{"order_id": "{order_id}"}}}}</tool_call>',
                f'<tool_call>{{"name": "cancel_order", "arguments": {{"order_id": "{order_id}", '
                '"reason": "no longer needed"}}</tool_call>',
                "Shall I proceed with that change?",
                "Your request has been completed.",
            ]
        )


# ---- the customer ------------------------------------------------------------------------------
_CONFIRM = ("shall i", "should i", "proceed", "confirm", "go ahead", "is that correct", "is this correct")
_DONE = ("has been", "have been", "is now", "successfully", "all set", "completed")
_REFUSED = ("cannot", "can't", "unable", "not possible", "not able", "not eligible")
_SCENARIO_LINE = re.compile(r"^\[scenario: ([\w-]+)\]$", re.MULTILINE)
_NEXT = "Thank you! "
_CONFUSED = "Sorry, I don't follow. "


def scripted_user(observation: str) -> str:
    """The scripted customer: reads its scenario and the conversation from its observation.

    It answers the agent's last message by keywords, in this order: a question about the email gets
    the email; a request for confirmation gets a yes; a report that something was done (or cannot be
    done), when not a question, moves on to the next request or ends with ``###STOP###``; a question
    about the order, the reason, the address or the items gets that detail of the current request;
    anything else gets a confused repeat of the request, and the third confusion ends the chat.
    """
    # The env's own header and transcript come last (messages from other agents are put on top, and
    # transcript lines are single lines), so the last header line and the last section are the real ones.
    found = _SCENARIO_LINE.findall(observation)
    scenario = next((s for s in SCENARIOS if found and s["id"] == found[-1]), None)
    if scenario is None:
        return f"I'm not sure why I'm here. {STOP}"
    conversation = observation.rsplit("\nConversation so far:\n", 1)[-1].splitlines()
    mine = [line[len("Customer: ") :] for line in conversation if line.startswith("Customer: ")]
    theirs = [line[len("Agent: ") :] for line in conversation if line.startswith("Agent: ")]
    requests = scenario["requests"]
    if not mine:
        return requests[0]["say"]
    index = min(sum(line.startswith(_NEXT) for line in mine), len(requests) - 1)
    request = requests[index]
    message = theirs[-1].lower() if theirs else ""
    email = DATABASE["customers"][scenario["customer"]]["email"]
    if "email" in message:
        return f"My email is {email}."
    if any(phrase in message for phrase in _CONFIRM):
        return "Yes, please go ahead."
    if "?" not in message and any(phrase in message for phrase in _DONE + _REFUSED):
        if index + 1 < len(requests):
            return _NEXT + requests[index + 1]["say"]
        return f"Thank you, that's all I needed. {STOP}"
    answers = [
        (("order id", "order number", "which order"), "order", "{}"),
        (("reason", "why"), "reason", "The reason is: {}."),
        (("address",), "address", "The new address is {}."),
        (("which item", "what item"), "items", "I want to return: {}."),
    ]
    for phrases, field, template in answers:
        if any(phrase in message for phrase in phrases) and field in request:
            value = request[field]
            return template.format(", ".join(value) if isinstance(value, list) else value)
    if sum(line.startswith(_CONFUSED) for line in mine) >= 2:
        return f"Never mind, I'll try again later. {STOP}"
    return _CONFUSED + request["say"]


def llm_user(generate: Callable[[list[dict[str, str]]], str]) -> Policy:
    """A customer played by a chat model: ``generate(messages) -> reply`` (e.g. an OpenAI-compatible
    client or a transformers pipeline). It sees the same observation as the scripted customer."""

    def policy(observation: str) -> str:
        reply = generate(
            [{"role": "system", "content": USER_PROMPT}, {"role": "user", "content": observation}]
        )
        return reply if isinstance(reply, str) else str(reply)

    return policy


def customer_service(
    scenario: str | None = None, max_turns: int = 30, user: Policy | None = None
) -> SingleAgentView:
    """The support agent's side as an Env; the customer is ``user`` (default: ``scripted_user``)."""
    return SingleAgentView(CustomerServiceEnv(scenario, max_turns), "agent", {"user": user or scripted_user})
