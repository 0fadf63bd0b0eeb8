"""The shop schema: customers, products, orders and their items."""

from __future__ import annotations

import random
from typing import Any

from gem_core.envs.sql.questions import Schema, Template
from gem_core.envs.sql.vocabulary import CITIES, date, distinct_phrases, people

DDL = """
CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, city TEXT NOT NULL, signup_date TEXT NOT NULL);
CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT NOT NULL, category TEXT NOT NULL, price REAL NOT NULL);
CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id), order_date TEXT NOT NULL, status TEXT NOT NULL);
CREATE TABLE order_items (order_id INTEGER NOT NULL REFERENCES orders(id), product_id INTEGER NOT NULL REFERENCES products(id), quantity INTEGER NOT NULL, PRIMARY KEY (order_id, product_id));
"""

CATEGORIES = {
    "books": ("Atlas", "Cookbook", "Novel", "Journal", "Guide"),
    "electronics": ("Headphones", "Charger", "Speaker", "Keyboard", "Lamp"),
    "garden": ("Shovel", "Planter", "Hose", "Rake", "Seeds"),
    "kitchen": ("Kettle", "Pan", "Knife", "Blender", "Mug"),
    "sports": ("Ball", "Racket", "Helmet", "Mat", "Bottle"),
    "toys": ("Puzzle", "Robot", "Kite", "Train", "Blocks"),
}
ADJECTIVES = ("Classic", "Compact", "Deluxe", "Eco", "Mini", "Pro", "Smart", "Travel", "Ultra", "Wooden")
STATUSES = ("delivered", "delivered", "delivered", "shipped", "pending", "cancelled")


def generate(rng: random.Random) -> dict[str, list[tuple[Any, ...]]]:
    customers = [
        (i + 1, name, rng.choice(CITIES[:8]), date(rng, 2019, 2023))
        for i, name in enumerate(people(rng, rng.randint(30, 45)))
    ]
    products = []
    for category, nouns in CATEGORIES.items():
        for name in distinct_phrases(rng, rng.randint(4, 6), ADJECTIVES, nouns):
            products.append((len(products) + 1, name, category, round(rng.uniform(3, 250), 2)))
    orders = [
        (i + 1, rng.randint(1, len(customers)), date(rng, 2021, 2024), rng.choice(STATUSES))
        for i in range(rng.randint(90, 140))
    ]
    items = [
        (order_id, product_id, rng.randint(1, 5))
        for order_id, *_ in orders
        for product_id in sorted(rng.sample(range(1, len(products) + 1), rng.randint(1, 4)))
    ]
    return {"customers": customers, "products": products, "orders": orders, "order_items": items}


CITY = "SELECT DISTINCT city FROM customers ORDER BY 1"
CUSTOMER = "SELECT name FROM customers ORDER BY 1"
PRODUCT = "SELECT name FROM products ORDER BY 1"
CATEGORY = "SELECT DISTINCT category FROM products ORDER BY 1"
STATUS = "SELECT DISTINCT status FROM orders ORDER BY 1"
ORDER_YEAR = "SELECT DISTINCT substr(order_date, 1, 4) FROM orders ORDER BY 1"
PRICE = "SELECT DISTINCT CAST(price AS INTEGER) + 1 FROM products ORDER BY 1"
SMALL = "SELECT column1 FROM (VALUES (2), (3), (4), (5))"
UNITS_SOLD = (
    "SELECT SUM(i{n}.quantity) AS units FROM products p{n} JOIN order_items i{n} ON i{n}.product_id = p{n}.id "
    "WHERE p{n}.category = {{category}} GROUP BY p{n}.id"
)

TEMPLATES = (
    # ---- easy: one table
    Template(
        "easy",
        "How many customers live in {city}?",
        "SELECT COUNT(*) FROM customers WHERE city = {city}",
        {"city": CITY},
    ),
    Template(
        "easy",
        "What is the price of the product '{product}'?",
        "SELECT price FROM products WHERE name = {product}",
        {"product": PRODUCT},
    ),
    Template(
        "easy",
        "Which products in the category '{category}' cost less than {price} dollars?",
        "SELECT name FROM products WHERE category = {category} AND price < {price}",
        {"category": CATEGORY, "price": PRICE},
        answer="list",
    ),
    Template(
        "easy",
        "How many orders have the status '{status}'?",
        "SELECT COUNT(*) FROM orders WHERE status = {status}",
        {"status": STATUS},
    ),
    Template(
        "easy",
        "What are the names of the {n} most expensive products, from the most expensive down (ties broken by name, A to Z)?",
        "SELECT name FROM products ORDER BY price DESC, name LIMIT {n}",
        {"n": SMALL},
        answer="list",
        ordered=True,
    ),
    Template(
        "easy",
        "Which customers signed up in {year}?",
        "SELECT name FROM customers WHERE substr(signup_date, 1, 4) = {year}",
        {"year": "SELECT DISTINCT substr(signup_date, 1, 4) FROM customers ORDER BY 1"},
        answer="list",
    ),
    # ---- medium: joins
    Template(
        "medium",
        "How many orders has {customer} placed?",
        "SELECT COUNT(*) FROM orders o JOIN customers c ON c.id = o.customer_id WHERE c.name = {customer}",
        {"customer": CUSTOMER},
    ),
    Template(
        "medium",
        "Which products were bought in order number {order}?",
        "SELECT p.name FROM order_items i JOIN products p ON p.id = i.product_id WHERE i.order_id = {order}",
        {"order": "SELECT id FROM orders ORDER BY 1"},
        answer="list",
    ),
    Template(
        "medium",
        "Which customers from {city} have at least one order with the status '{status}'?",
        "SELECT DISTINCT c.name FROM customers c JOIN orders o ON o.customer_id = c.id WHERE c.city = {city} AND o.status = {status}",
        {"city": CITY, "status": STATUS},
        answer="list",
    ),
    Template(
        "medium",
        "How many units of '{product}' were ordered in total, over all orders?",
        "SELECT SUM(i.quantity) FROM order_items i JOIN products p ON p.id = i.product_id WHERE p.name = {product}",
        {"product": PRODUCT},
    ),
    Template(
        "medium",
        "On which date (YYYY-MM-DD) did {customer} place their first order?",
        "SELECT MIN(o.order_date) FROM orders o JOIN customers c ON c.id = o.customer_id WHERE c.name = {customer}",
        {"customer": CUSTOMER},
    ),
    Template(
        "medium",
        "From which product categories has {customer} bought products?",
        "SELECT DISTINCT p.category FROM customers c JOIN orders o ON o.customer_id = c.id "
        "JOIN order_items i ON i.order_id = o.id JOIN products p ON p.id = i.product_id WHERE c.name = {customer}",
        {"customer": CUSTOMER},
        answer="list",
    ),
    # ---- hard: aggregates with grouping
    Template(
        "hard",
        "Which customer from {city} has placed the most orders?",
        "SELECT c.name FROM customers c JOIN orders o ON o.customer_id = c.id WHERE c.city = {city} GROUP BY c.id "
        "HAVING COUNT(*) = (SELECT MAX(n) FROM (SELECT COUNT(*) AS n FROM customers c2 JOIN orders o2 "
        "ON o2.customer_id = c2.id WHERE c2.city = {city} GROUP BY c2.id))",
        {"city": CITY},
    ),
    Template(
        "hard",
        "For each product category, how many products cost more than {price} dollars? List only the categories that have at least one.",
        "SELECT category, COUNT(*) FROM products WHERE price > {price} GROUP BY category",
        {"price": PRICE},
        answer="pairs",
    ),
    Template(
        "hard",
        "What was the total revenue (quantity times price) of the delivered orders placed in {year}, rounded to 2 decimal places?",
        "SELECT ROUND(SUM(i.quantity * p.price), 2) FROM orders o JOIN order_items i ON i.order_id = o.id "
        "JOIN products p ON p.id = i.product_id WHERE o.status = 'delivered' AND substr(o.order_date, 1, 4) = {year}",
        {"year": ORDER_YEAR},
    ),
    Template(
        "hard",
        "Which cities have more than {n} customers?",
        "SELECT city FROM customers GROUP BY city HAVING COUNT(*) > {n}",
        {"n": SMALL},
        answer="list",
    ),
    Template(
        "hard",
        "On average, how many different products does an order with the status '{status}' contain? Round to 2 decimal places.",
        "SELECT ROUND(AVG(n), 2) FROM (SELECT COUNT(*) AS n FROM orders o JOIN order_items i ON i.order_id = o.id "
        "WHERE o.status = {status} GROUP BY o.id)",
        {"status": STATUS},
    ),
    Template(
        "hard",
        "Which product in the category '{category}' has sold the most units in total?",
        "SELECT p.name FROM products p JOIN order_items i ON i.product_id = p.id WHERE p.category = {category} "
        f"GROUP BY p.id HAVING SUM(i.quantity) = (SELECT MAX(units) FROM ({UNITS_SOLD.format(n=2)}))",
        {"category": CATEGORY},
    ),
    Template(
        "hard",
        "For each order status, how many orders were placed in {year}?",
        "SELECT status, COUNT(*) FROM orders WHERE substr(order_date, 1, 4) = {year} GROUP BY status",
        {"year": ORDER_YEAR},
        answer="pairs",
    ),
)

SCHEMA = Schema("shop", DDL, generate, TEMPLATES)
