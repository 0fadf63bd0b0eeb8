"""Multi-agent text environments and the view that trains one agent of them as a single-agent Env.

``core.MultiAgentEnv`` is the API (named agents, sequential or parallel turns, messages between
agents); ``single_agent.SingleAgentView`` exposes one agent as an ``Env`` with the others played by
policies; ``core.rollout`` plays whole episodes (self-play). The envs:

``tictactoe.TicTacToeEnv``               two players; ``minimax_policy`` never loses
``customer_service.CustomerServiceEnv``  a support agent, a customer and an orders database

Registered (as single-agent views): ``multiagent:TicTacToe-v0`` (you play X against minimax),
``multiagent:TicTacToe-v0-random`` (against random moves) and ``multiagent:CustomerService-v0``
(you are the support agent; the customer is the scripted simulator).
"""

from __future__ import annotations

from gem_core.envs.multiagent.core import MultiAgentEnv, rollout
from gem_core.envs.multiagent.single_agent import SingleAgentView
from gem_core.registry import register

__all__ = ["MultiAgentEnv", "SingleAgentView", "rollout"]

register(
    "multiagent:TicTacToe-v0",
    "gem_core.envs.multiagent.tictactoe:tictactoe",
    description="tic-tac-toe as X against a minimax O (a draw is the best result)",
    opponent="minimax",
)
register(
    "multiagent:TicTacToe-v0-random",
    "gem_core.envs.multiagent.tictactoe:tictactoe",
    description="tic-tac-toe as X against uniformly random moves",
    opponent="random",
)
register(
    "multiagent:CustomerService-v0",
    "gem_core.envs.multiagent.customer_service:customer_service",
    description="tau-bench-style retail support: tools over an orders database, a scripted customer",
)
