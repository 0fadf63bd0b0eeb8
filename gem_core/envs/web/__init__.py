"""Web envs, offline: ``web:Shop-v0`` (WebShop over a generated catalogue, ``shop.py``) and
``web:WikiGame-v0`` (reach a target page by following links over the QA corpus, ``wikigame.py``)."""

from gem_core.registry import register


def _register() -> None:
    register(
        "web:Shop-v0",
        "gem_core.envs.web.shop:ShopEnv",
        description="WebShop offline: search and click through 1,100 generated products to buy what the instruction asks",
        max_turns=15,
    )
    wikigame = "gem_core.envs.web.wikigame:WikiGameEnv"
    corpus = "the 94 linked pages of qa:LocalWiki-v0's corpus"
    register(
        "web:WikiGame-v0",
        wikigame,
        description=f"reach a target page 2+ clicks away by following links, 10 turns ({corpus})",
        max_turns=10,
        min_distance=2,
    )
    # The reference GEM's easy and hard turn limits (game:WikiGame-v0-easy|hard).
    register(
        "web:WikiGame-v0-easy",
        wikigame,
        description=f"reach a target page 2+ clicks away, 30 turns ({corpus})",
        max_turns=30,
        min_distance=2,
    )
    register(
        "web:WikiGame-v0-hard",
        wikigame,
        description=f"reach a target page 4+ clicks away, 15 turns ({corpus})",
        max_turns=15,
        min_distance=4,
    )


_register()
