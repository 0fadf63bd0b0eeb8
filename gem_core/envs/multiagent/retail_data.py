"""The customer-service world: a small shop's database and the scenarios played on it.

``DATABASE`` holds customers and orders (plain dicts, copied per episode). Each scenario names the
customer and what they want, as a list of requests said one after another; a request's fields are
what the customer reveals when asked (``order``: an id or a description, ``reason``, ``address``,
``items``). ``goal`` lists the write calls a correct agent makes; the goal database is the initial
one with those calls applied, and an episode scores 1 iff its final database equals it. ``solution``
is a reference conversation (the agent's side) that the tests play against the scripted customer.
"""

from __future__ import annotations

import json
from typing import Any


def call(name: str, **arguments: Any) -> str:
    """A tool call in the agent's action format."""
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def _order(customer: str, status: str, address: str, *items: tuple[str, float]) -> dict[str, Any]:
    return {
        "customer_id": customer,
        "status": status,
        "address": address,
        "items": [{"name": name, "price": price} for name, price in items],
        "cancel_reason": None,
        "returned_items": [],
    }


DATABASE: dict[str, Any] = {
    "customers": {
        "C01": {"name": "Alice Ng", "email": "alice.ng@example.com"},
        "C02": {"name": "Bob Stone", "email": "bob.stone@example.com"},
        "C03": {"name": "Carol Diaz", "email": "carol.diaz@example.com"},
        "C04": {"name": "Dave Okafor", "email": "dave.okafor@example.com"},
        "C05": {"name": "Erin Walsh", "email": "erin.walsh@example.com"},
        "C06": {"name": "Frank Li", "email": "frank.li@example.com"},
        "C07": {"name": "Grace Kim", "email": "grace.kim@example.com"},
        "C08": {"name": "Heidi Berg", "email": "heidi.berg@example.com"},
        "C09": {"name": "Ivan Petrov", "email": "ivan.petrov@example.com"},
        "C10": {"name": "Kevin Moss", "email": "kevin.moss@example.com"},
    },
    "orders": {
        "W1001": _order("C01", "pending", "4 Lake Road, Easton", ("keyboard", 49.9)),
        "W1002": _order("C01", "delivered", "4 Lake Road, Easton", ("monitor", 189.0)),
        "W1003": _order("C02", "pending", "9 Hill Street, Weston", ("mouse", 19.9)),
        "W1004": _order("C02", "pending", "9 Hill Street, Weston", ("usb hub", 22.0)),
        "W1005": _order("C03", "processing", "31 Bay Lane, Northam", ("laptop stand", 35.5)),
        "W1006": _order("C04", "delivered", "2 Mill Close, Southby", ("webcam", 64.99), ("tripod", 18.5)),
        "W1007": _order("C05", "delivered", "8 Glen Way, Eastwick", ("desk lamp", 29.0), ("notebook", 4.5)),
        "W1008": _order("C06", "shipped", "60 Quay Street, Portley", ("headphones", 89.0)),
        "W1009": _order("C07", "pending", "15 Park Row, Midvale", ("office chair", 149.0)),
        "W1010": _order("C07", "pending", "15 Park Row, Midvale", ("hdmi cable", 9.99)),
        "W1011": _order("C08", "pending", "3 Ash Court, Hollow", ("plant pot", 12.0)),
        "W1012": _order("C08", "processing", "3 Ash Court, Hollow", ("watering can", 16.0)),
        "W1013": _order("C08", "delivered", "3 Ash Court, Hollow", ("garden gloves", 8.0)),
        "W1014": _order("C09", "delivered", "70 Cross Street, Dunmore", ("blender", 79.0)),
        "W1015": _order("C09", "shipped", "70 Cross Street, Dunmore", ("toaster", 39.0)),
        "W1016": _order("C10", "pending", "11 Fern Drive, Oakley", ("phone case", 15.0)),
        "W1017": _order("C10", "pending", "11 Fern Drive, Oakley", ("charger", 25.0)),
        "W1018": _order("C06", "pending", "60 Quay Street, Portley", ("phone stand", 12.0)),
    },
}


def _ask_email() -> str:
    return "I can help with that. First, could you tell me the email address on your account?"


SCENARIOS: list[dict[str, Any]] = [
    {
        "id": "cancel_known_order",
        "customer": "C01",
        "requests": [
            {
                "say": "Hi! I'd like to cancel my order W1001, please.",
                "order": "It's order W1001.",
                "reason": "no longer needed",
            }
        ],
        "goal": [{"name": "cancel_order", "arguments": {"order_id": "W1001", "reason": "no longer needed"}}],
        "solution": [
            _ask_email(),
            call("find_customer", email="alice.ng@example.com"),
            call("get_order", order_id="W1001"),
            "Why would you like to cancel it: is it no longer needed, or was it ordered by mistake?",
            "To confirm: I will cancel order W1001 (keyboard) because it is no longer needed. Shall I proceed?",
            call("cancel_order", order_id="W1001", reason="no longer needed"),
            "Your order W1001 has been cancelled.",
        ],
    },
    {
        "id": "cancel_by_item",
        "customer": "C02",
        "requests": [
            {
                "say": "Hello, I ordered a usb hub by mistake and want to cancel that order.",
                "order": "I don't know the order number; it's the one with the usb hub.",
                "reason": "ordered by mistake",
            }
        ],
        "goal": [
            {"name": "cancel_order", "arguments": {"order_id": "W1004", "reason": "ordered by mistake"}}
        ],
        "solution": [
            _ask_email(),
            call("find_customer", email="bob.stone@example.com"),
            call("list_orders", customer_id="C02"),
            "I see the usb hub in order W1004. Shall I cancel order W1004 because it was ordered by mistake?",
            call("cancel_order", order_id="W1004", reason="ordered by mistake"),
            "Done: order W1004 has been cancelled.",
        ],
    },
    {
        "id": "change_address",
        "customer": "C03",
        "requests": [
            {
                "say": "Hi, I moved. Can you change the shipping address of order W1005?",
                "order": "It's order W1005.",
                "address": "12 Elm Street, Springfield",
            }
        ],
        "goal": [
            {
                "name": "modify_address",
                "arguments": {"order_id": "W1005", "address": "12 Elm Street, Springfield"},
            }
        ],
        "solution": [
            _ask_email(),
            call("find_customer", email="carol.diaz@example.com"),
            call("get_order", order_id="W1005"),
            "What is the new shipping address?",
            "I will change the address of order W1005 to 12 Elm Street, Springfield. Shall I proceed?",
            call("modify_address", order_id="W1005", address="12 Elm Street, Springfield"),
            "The address of order W1005 has been updated.",
        ],
    },
    {
        "id": "return_one_item",
        "customer": "C04",
        "requests": [
            {
                "say": "Hi, the webcam from my order W1006 doesn't work. I want to return it.",
                "order": "It's order W1006.",
                "items": ["webcam"],
            }
        ],
        "goal": [{"name": "return_items", "arguments": {"order_id": "W1006", "items": ["webcam"]}}],
        "solution": [
            _ask_email(),
            call("find_customer", email="dave.okafor@example.com"),
            call("get_order", order_id="W1006"),
            "I will request a return of the webcam (not the tripod) from order W1006. Shall I proceed?",
            call("return_items", order_id="W1006", items=["webcam"]),
            "The return of the webcam has been requested.",
        ],
    },
    {
        "id": "return_whole_order",
        "customer": "C05",
        "requests": [
            {
                "say": "I'd like to return everything from my last delivered order.",
                "order": "I don't have the number; it's the order with the desk lamp.",
                "items": ["desk lamp", "notebook"],
            }
        ],
        "goal": [
            {"name": "return_items", "arguments": {"order_id": "W1007", "items": ["desk lamp", "notebook"]}}
        ],
        "solution": [
            _ask_email(),
            call("find_customer", email="erin.walsh@example.com"),
            call("list_orders", customer_id="C05"),
            "Which items would you like to return?",
            "I will request a return of the desk lamp and the notebook from order W1007. Shall I proceed?",
            call("return_items", order_id="W1007", items=["desk lamp", "notebook"]),
            "The return of both items has been requested.",
        ],
    },
    {
        "id": "cancel_shipped_refused",
        "customer": "C06",
        "requests": [
            {"say": "Please cancel my order W1008, I don't want it anymore.", "order": "It's order W1008."}
        ],
        "goal": [],
        "verify": ["W1008"],  # a refusal: the order's status must have been looked up
        "solution": [
            _ask_email(),
            call("find_customer", email="frank.li@example.com"),
            call("get_order", order_id="W1008"),
            "I'm sorry, order W1008 has already shipped, so it cannot be cancelled. "
            "Once it is delivered you can return it.",
        ],
    },
    {
        "id": "address_then_cancel",
        "customer": "C07",
        "requests": [
            {
                "say": "Hi, please change the address of my office chair order.",
                "order": "It's the order with the office chair.",
                "address": "5 Oak Avenue, Riverton",
            },
            {
                "say": "Also, please cancel my order W1010 with the hdmi cable.",
                "order": "It's order W1010.",
                "reason": "no longer needed",
            },
        ],
        "goal": [
            {
                "name": "modify_address",
                "arguments": {"order_id": "W1009", "address": "5 Oak Avenue, Riverton"},
            },
            {"name": "cancel_order", "arguments": {"order_id": "W1010", "reason": "no longer needed"}},
        ],
        "solution": [
            _ask_email(),
            call("find_customer", email="grace.kim@example.com"),
            call("list_orders", customer_id="C07"),
            "The office chair is order W1009. What is the new address?",
            "I will change the address of order W1009 to 5 Oak Avenue, Riverton. Shall I proceed?",
            call("modify_address", order_id="W1009", address="5 Oak Avenue, Riverton"),
            "The address of order W1009 has been updated.",
            "What is the reason for cancelling W1010: no longer needed, or ordered by mistake?",
            "I will cancel order W1010 because it is no longer needed. Shall I proceed?",
            call("cancel_order", order_id="W1010", reason="no longer needed"),
            "Order W1010 has been cancelled.",
        ],
    },
    {
        "id": "address_on_unshipped_orders",
        "customer": "C08",
        "requests": [
            {
                "say": "I'm moving. Please update the address on all my orders that haven't shipped yet.",
                "order": "All of my orders that have not shipped.",
                "address": "77 Pine Road, Lakeside",
            }
        ],
        "goal": [
            {
                "name": "modify_address",
                "arguments": {"order_id": "W1011", "address": "77 Pine Road, Lakeside"},
            },
            {
                "name": "modify_address",
                "arguments": {"order_id": "W1012", "address": "77 Pine Road, Lakeside"},
            },
        ],
        "solution": [
            _ask_email(),
            call("find_customer", email="heidi.berg@example.com"),
            call("list_orders", customer_id="C08"),
            "Orders W1011 and W1012 have not shipped yet (W1013 was delivered). What is the new address?",
            "I will change the address of W1011 and W1012 to 77 Pine Road, Lakeside. Shall I proceed?",
            call("modify_address", order_id="W1011", address="77 Pine Road, Lakeside"),
            call("modify_address", order_id="W1012", address="77 Pine Road, Lakeside"),
            "Both addresses have been updated.",
        ],
    },
    {
        "id": "return_only_delivered",
        "customer": "C09",
        "requests": [
            {
                "say": "I want to return my blender and my toaster.",
                "order": "The blender and the toaster orders; I don't know the numbers.",
                "items": ["blender", "toaster"],
            }
        ],
        "goal": [{"name": "return_items", "arguments": {"order_id": "W1014", "items": ["blender"]}}],
        "solution": [
            _ask_email(),
            call("find_customer", email="ivan.petrov@example.com"),
            call("list_orders", customer_id="C09"),
            "The toaster (W1015) has not been delivered yet, so it cannot be returned now, but the blender "
            "(W1014) can. Shall I proceed with returning the blender?",
            call("return_items", order_id="W1014", items=["blender"]),
            "The return of the blender has been requested.",
        ],
    },
    {
        "id": "cancel_the_dearer_order",
        "customer": "C10",
        "requests": [
            {
                "say": "I have two pending orders. Please cancel whichever one is more expensive.",
                "order": "Whichever of my two pending orders costs more.",
                "reason": "no longer needed",
            }
        ],
        "goal": [{"name": "cancel_order", "arguments": {"order_id": "W1017", "reason": "no longer needed"}}],
        "solution": [
            _ask_email(),
            call("find_customer", email="kevin.moss@example.com"),
            call("list_orders", customer_id="C10"),
            call("get_order", order_id="W1016"),
            call("get_order", order_id="W1017"),
            "Order W1017 (charger, 25.00) costs more than W1016 (phone case, 15.00). What is the reason for "
            "cancelling: no longer needed, or ordered by mistake?",
            "I will cancel order W1017 because it is no longer needed. Shall I proceed?",
            call("cancel_order", order_id="W1017", reason="no longer needed"),
            "Order W1017 has been cancelled.",
        ],
    },
]
