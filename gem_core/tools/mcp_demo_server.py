"""A small MCP server for demos and tests: an orders database in sqlite.

Tools: ``lookup_order(order_id)``, ``list_orders(customer)``, ``update_order_status(order_id, status)``
and ``order_total(customer)``. A new database is seeded with a fixed set of orders.

Run it over stdio (what ``MCPTool`` launches) or streamable HTTP::

    python -m gem_core.tools.mcp_demo_server --db orders.sqlite
    python -m gem_core.tools.mcp_demo_server --db orders.sqlite --transport streamable-http --port 8765

Built on the official ``mcp`` SDK (``MCPServer``, formerly ``FastMCP``).
"""

from __future__ import annotations

import argparse
import sqlite3
from pathlib import Path
from typing import Any

STATUSES = ("pending", "shipped", "delivered", "cancelled")
SEED_ORDERS = [
    (1001, "alice", "keyboard", 1, 49.90, "delivered"),
    (1002, "alice", "monitor", 2, 379.00, "shipped"),
    (1003, "bob", "mouse", 3, 59.70, "pending"),
    (1004, "carol", "laptop stand", 1, 35.50, "pending"),
    (1005, "bob", "usb hub", 1, 22.00, "cancelled"),
    (1006, "dave", "webcam", 1, 64.99, "shipped"),
]


def open_db(path: str | Path) -> sqlite3.Connection:
    """Open (creating and seeding if new) the orders database at ``path``."""
    db = sqlite3.connect(str(path), check_same_thread=False)
    db.row_factory = sqlite3.Row
    with db:
        db.execute(
            "CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, customer TEXT NOT NULL, "
            "item TEXT NOT NULL, quantity INTEGER NOT NULL, total REAL NOT NULL, status TEXT NOT NULL)"
        )
        if db.execute("SELECT COUNT(*) FROM orders").fetchone()[0] == 0:
            db.executemany("INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?)", SEED_ORDERS)
    return db


def build_server(db_path: str | Path, **server_options: Any):
    """The MCP server over the database at ``db_path``."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError  # its message reaches the client

    db = open_db(db_path)
    server = MCPServer(
        "orders", instructions="An orders database: look up and update orders.", **server_options
    )

    def row(order_id: int) -> dict[str, Any]:
        found = db.execute("SELECT * FROM orders WHERE id = ?", (order_id,)).fetchone()
        if found is None:
            raise ToolError(f"no order with id {order_id}")
        return dict(found)

    @server.tool()
    def lookup_order(order_id: int) -> dict[str, Any]:
        """Look up one order by its id: customer, item, quantity, total and status."""
        return row(order_id)

    @server.tool()
    def list_orders(customer: str) -> list[dict[str, Any]]:
        """All orders of a customer (by name), oldest first."""
        rows = db.execute("SELECT * FROM orders WHERE customer = ? ORDER BY id", (customer.lower(),))
        return [dict(r) for r in rows]

    @server.tool()
    def update_order_status(order_id: int, status: str) -> dict[str, Any]:
        """Set an order's status to one of: pending, shipped, delivered, cancelled."""
        if status not in STATUSES:
            raise ToolError(f"status must be one of {', '.join(STATUSES)}; got {status!r}")
        row(order_id)
        with db:
            db.execute("UPDATE orders SET status = ? WHERE id = ?", (status, order_id))
        return row(order_id)

    @server.tool()
    def order_total(customer: str) -> float:
        """The total amount a customer spent on orders that were not cancelled."""
        value = db.execute(
            "SELECT COALESCE(SUM(total), 0) FROM orders WHERE customer = ? AND status != 'cancelled'",
            (customer.lower(),),
        ).fetchone()[0]
        return round(float(value), 2)

    return server


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m gem_core.tools.mcp_demo_server", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--db", required=True, help="sqlite file (created and seeded if missing)")
    parser.add_argument("--transport", choices=("stdio", "streamable-http"), default="stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args(argv)
    server = build_server(args.db, log_level="WARNING")
    if args.transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host=args.host, port=args.port)


if __name__ == "__main__":
    main()
