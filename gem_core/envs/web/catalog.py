"""The shop's catalogue: 1,100 products generated deterministically (the same in every process), a
BM25 index over it, and WebShop's goals and reward.

Products follow WebShop's item format: an ASIN-like id, a title, a category path (department ›
product type), attributes (short phrases such as "fluoride free"), options to choose on the item page
(``{"flavor": [...], "size": [...]}``), a price, features, a description and reviews. Titles name the
product type and all its attributes, as real listings mostly do.

``reward(product, goal, options)`` is WebShop's ``get_reward``: the share of goal attributes the
product has (in its attributes, or in its title, features or description), of goal option values
that were selected, and whether the price is under the goal's limit, weighted by the count of each
(``(attributes + options + price) / (n_attributes + n_options + 1)``), times ``r_type``, which is 1
for a product of the right type and drops to 0 for an unrelated one. WebShop finds the "type" words
of titles with spaCy's noun tagger and matches attributes and options with fuzzy string matching;
here the product-type words and the attribute and option vocabularies are known (they were
generated), so those comparisons are exact on normalised text.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass
from typing import Any

CATALOGUE_SEED = "gem-core-shop-v0"
PRODUCTS_PER_TYPE = 44
PRICE_RANGE = [10.0 * i for i in range(1, 100)]  # WebShop's price limits
SEARCH_RETURN_N = 50  # WebShop: results of a search
PRODUCT_WINDOW = 10  # WebShop: results on a page

BRANDS = [
    "Acorn",
    "Aero",
    "Alba",
    "Bloom",
    "Brava",
    "Cobalt",
    "Crest",
    "Delta",
    "Ember",
    "Fable",
    "Gala",
    "Harbor",
    "Iris",
    "Juniper",
    "Kinto",
    "Lumora",
    "Mistral",
    "Nimbus",
    "Orchid",
    "Pico",
    "Quill",
    "Rivet",
    "Sable",
    "Tundra",
    "Umber",
    "Vela",
    "Willow",
    "Zephyr",
]
COLORS = ("black", "white", "grey", "navy", "red", "green", "beige", "pink", "blue", "brown")
CLOTHING_SIZES = ("small", "medium", "large", "x-large")

# department -> product type -> (attributes, options)
DEPARTMENTS: dict[str, dict[str, tuple[tuple[str, ...], dict[str, tuple[str, ...]]]]] = {
    "beauty & personal care": {
        "toothpaste": (
            (
                "fluoride free",
                "sensitive teeth",
                "long lasting",
                "natural ingredients",
                "whitening",
                "travel size",
            ),
            {
                "flavor": ("mint", "cinnamon", "charcoal", "strawberry"),
                "size": ("1 pack", "2 pack", "4 pack"),
            },
        ),
        "shampoo": (
            ("sulfate free", "paraben free", "dry hair", "natural ingredients", "cruelty free", "color safe"),
            {"scent": ("lavender", "coconut", "unscented", "citrus"), "size": ("8 oz", "16 oz", "32 oz")},
        ),
        "face moisturizer": (
            (
                "oil free",
                "fragrance free",
                "sensitive skin",
                "cruelty free",
                "hyaluronic acid",
                "non comedogenic",
            ),
            {"size": ("1.7 oz", "3.4 oz")},
        ),
        "lipstick": (
            ("long lasting", "cruelty free", "matte finish", "paraben free", "vegan", "hydrating"),
            {"color": ("red", "pink", "nude", "berry", "coral")},
        ),
        "hair dryer": (
            ("ionic", "lightweight", "fast drying", "low noise", "foldable", "diffuser included"),
            {"color": ("black", "white", "rose gold")},
        ),
    },
    "home & kitchen": {
        "throw pillow cover": (
            ("machine washable", "double sided", "hidden zipper", "soft velvet", "fade resistant"),
            {"color": COLORS[:7], "size": ("16 x 16 inch", "18 x 18 inch", "20 x 20 inch")},
        ),
        "bath towel set": (
            ("quick dry", "highly absorbent", "machine washable", "organic cotton", "hotel quality"),
            {"color": COLORS[:6], "size": ("2 piece", "4 piece", "6 piece")},
        ),
        "coffee maker": (
            ("programmable", "stainless steel", "auto shut off", "easy to clean", "dishwasher safe parts"),
            {"color": ("black", "silver", "red")},
        ),
        "storage basket": (
            ("foldable", "handmade", "with handles", "water resistant", "stackable"),
            {"color": ("beige", "grey", "white", "brown"), "size": ("small", "medium", "large")},
        ),
        "desk lamp": (
            ("dimmable", "usb charging port", "eye caring", "touch control", "energy saving"),
            {"color": ("black", "white", "silver")},
        ),
    },
    "clothing & shoes": {
        "running shoes": (
            ("lightweight", "non slip", "breathable", "memory foam", "arch support", "wide fit"),
            {"color": COLORS[:8], "size": ("7", "8", "9", "10", "11", "12")},
        ),
        "t-shirt": (
            ("cotton", "machine washable", "short sleeve", "relaxed fit", "moisture wicking", "crew neck"),
            {"color": COLORS, "size": CLOTHING_SIZES},
        ),
        "winter jacket": (
            ("water resistant", "hooded", "windproof", "fleece lined", "packable", "zip pockets"),
            {"color": ("black", "navy", "green", "red", "grey"), "size": CLOTHING_SIZES},
        ),
        "yoga pants": (
            (
                "high waist",
                "tummy control",
                "moisture wicking",
                "squat proof",
                "with pockets",
                "four way stretch",
            ),
            {"color": ("black", "grey", "navy", "pink", "green"), "size": CLOTHING_SIZES},
        ),
        "socks": (
            ("cushioned", "moisture wicking", "cotton", "ankle length", "breathable", "arch compression"),
            {"color": ("black", "white", "grey"), "size": ("medium", "large")},
        ),
    },
    "electronics": {
        "wireless earbuds": (
            (
                "noise cancelling",
                "waterproof",
                "long battery life",
                "bluetooth 5.3",
                "charging case",
                "touch control",
            ),
            {"color": ("black", "white", "blue")},
        ),
        "phone case": (
            ("shockproof", "slim fit", "wireless charging compatible", "card holder", "clear back"),
            {
                "color": ("black", "clear", "pink", "blue", "green"),
                "model": ("iphone 14", "iphone 15", "galaxy s23"),
            },
        ),
        "usb c cable": (
            ("fast charging", "braided", "durable", "data transfer", "tangle free"),
            {"color": ("black", "white", "red"), "length": ("3 ft", "6 ft", "10 ft")},
        ),
        "portable charger": (
            ("fast charging", "compact", "high capacity", "led display", "dual usb"),
            {"color": ("black", "white", "blue")},
        ),
        "bluetooth speaker": (
            ("waterproof", "portable", "long battery life", "deep bass", "built in microphone"),
            {"color": ("black", "red", "blue", "grey")},
        ),
    },
    "grocery & gourmet food": {
        "green tea": (
            ("organic", "decaf", "loose leaf", "non gmo", "fair trade"),
            {
                "flavor": ("jasmine", "mint", "lemon", "original"),
                "size": ("20 count", "50 count", "100 count"),
            },
        ),
        "protein bar": (
            ("gluten free", "low sugar", "high protein", "vegan", "non gmo"),
            {"flavor": ("chocolate", "peanut butter", "vanilla", "berry"), "size": ("12 count", "24 count")},
        ),
        "coffee beans": (
            ("whole bean", "medium roast", "dark roast", "organic", "fair trade"),
            {"size": ("12 oz", "2 lb", "5 lb")},
        ),
        "trail mix": (
            ("gluten free", "non gmo", "resealable bag", "no added sugar", "keto friendly"),
            {"flavor": ("sweet and salty", "tropical", "nut lovers"), "size": ("6 pack", "12 pack")},
        ),
        "olive oil": (
            ("extra virgin", "cold pressed", "organic", "non gmo", "glass bottle"),
            {"size": ("500 ml", "1 liter", "3 liter")},
        ),
    },
}
PRICES = {  # product type -> (lowest, highest) price in dollars
    "hair dryer": (25, 180),
    "coffee maker": (30, 250),
    "desk lamp": (15, 90),
    "running shoes": (35, 160),
    "winter jacket": (40, 260),
    "wireless earbuds": (20, 220),
    "portable charger": (15, 80),
    "bluetooth speaker": (20, 200),
    "bath towel set": (15, 90),
}
DEFAULT_PRICES = (4, 45)


@dataclass(frozen=True)
class Product:
    asin: str
    title: str
    product_type: str  # WebShop's "query" (the search the item was scraped from)
    category: str  # "department › product type"
    attributes: tuple[str, ...]
    options: tuple[tuple[str, tuple[str, ...]], ...]  # (name, values) in display order
    price: float
    rating: float
    features: tuple[str, ...]
    description: str
    reviews: tuple[str, ...]

    @property
    def option_values(self) -> dict[str, str]:
        """Each option value (as clicked, lowercase) -> its option name."""
        return {value: name for name, values in self.options for value in values}

    def search_text(self) -> str:
        offered = "; ".join(f"{name}: {', '.join(values)}" for name, values in self.options)
        return f"{self.title}\n{self.category}\n{' '.join(self.features)}\n{offered}"


def _asin(rng: random.Random) -> str:
    return "B0" + "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ0123456789") for _ in range(8))


def _title(brand: str, product_type: str, attributes: tuple[str, ...]) -> str:
    return f"{brand} {product_type.title()} - {', '.join(a.title() for a in attributes)}"


@functools.lru_cache(maxsize=1)
def catalogue() -> tuple[Product, ...]:
    """Every product, in a fixed order (seeded by ``CATALOGUE_SEED``)."""
    rng = random.Random(CATALOGUE_SEED)
    products, asins = [], set()
    for department, types in DEPARTMENTS.items():
        for product_type, (attributes, options) in types.items():
            low, high = PRICES.get(product_type, DEFAULT_PRICES)
            for _ in range(PRODUCTS_PER_TYPE):
                asin = _asin(rng)
                while asin in asins:
                    asin = _asin(rng)
                asins.add(asin)
                brand = rng.choice(BRANDS)
                chosen = tuple(sorted(rng.sample(attributes, rng.randint(2, 4)), key=attributes.index))
                offered = tuple(
                    (name, tuple(sorted(rng.sample(values, rng.randint(2, len(values))), key=values.index)))
                    for name, values in options.items()
                )
                rating = round(rng.uniform(2.5, 5.0), 1)
                features = tuple(f"{a.capitalize()}: made to be {a} for everyday use." for a in chosen)
                description = (
                    f"The {brand} {product_type} is {', '.join(chosen[:-1])} and {chosen[-1]}. "
                    f"A {product_type} from our {department} range."
                )
                reviews = (
                    f"Rating {rating} out of 5. Does what a {product_type} should.",
                    f"Bought it for the {rng.choice(chosen)} part and I am happy with it.",
                )
                products.append(
                    Product(
                        asin,
                        _title(brand, product_type, chosen),
                        product_type,
                        f"{department} › {product_type}",
                        chosen,
                        offered,
                        round(rng.uniform(low, high), 2),
                        rating,
                        features,
                        description,
                        reviews,
                    )
                )
    return tuple(products)


@functools.lru_cache(maxsize=1)
def products_by_asin() -> dict[str, Product]:
    return {p.asin.lower(): p for p in catalogue()}


@functools.lru_cache(maxsize=1)
def search_index() -> Any:
    """The BM25 index over titles, categories, features and option values (``gem_core.tools.search.SearchIndex``)."""
    from gem_core.tools.search import SearchIndex

    return SearchIndex({"id": p.asin, "title": p.title, "text": p.search_text()} for p in catalogue())


def search(keywords: str) -> list[str]:
    """The ASINs (lowercase) of the best ``SEARCH_RETURN_N`` products for ``keywords``, best first."""
    return [hit["id"].lower() for hit in search_index().search(keywords, k=SEARCH_RETURN_N)]


# ---- goals and reward (WebShop's engine/goal.py) --------------------------------------------------
INSTRUCTION_OPENINGS = ("i need", "i am looking for", "find me", "i want to buy", "i'm shopping for")


def make_goal(rng: random.Random) -> dict[str, Any]:
    """A goal drawn from a product: some of its attributes, one value of some of its options, and a
    price limit above its price (WebShop's synthetic goals)."""
    product = rng.choice(catalogue())
    attributes = sorted(rng.sample(product.attributes, rng.randint(1, min(3, len(product.attributes)))))
    names = [name for name, _ in product.options]
    wanted = sorted(rng.sample(names, rng.randint(1, len(names))), key=names.index) if names else []
    options = {name: rng.choice(dict(product.options)[name]) for name in wanted}
    price_range = [p for p in PRICE_RANGE if p > product.price][:4]
    if len(price_range) >= 2:
        price_upper = sorted(rng.sample(price_range, 2))[1]
        price_text = f", and price lower than {price_upper:.2f} dollars"
    else:
        price_upper, price_text = 1_000_000.0, ""
    option_text = ", and ".join(f"{k}: {v}" for k, v in options.items())
    article = "an" if product.product_type[0] in "aeiou" else "a"
    text = (
        f"{rng.choice(INSTRUCTION_OPENINGS)} {article} {product.product_type} that is {' and '.join(attributes)}"
        f"{' with ' + option_text if option_text else ''}{price_text}"
    )
    return {
        "asin": product.asin,
        "product_type": product.product_type,
        "category": product.category,
        "attributes": attributes,
        "options": options,
        "price_upper": price_upper,
        "instruction_text": text,
    }


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def type_reward(product: Product, goal: dict[str, Any]) -> float:
    """WebShop's ``r_type``: 1 for the same type of product; 0.5, 0.1 or 0 as the match weakens."""
    query_match = product.product_type == goal["product_type"]
    category_match = (
        len(
            {c.strip() for c in product.category.split("›")}
            & {c.strip() for c in goal["category"].split("›")}
        )
        >= 2
    )
    wanted = set(goal["product_type"].split())
    title_score = len(set(product.product_type.split()) & wanted) / len(wanted)
    r_type = 1.0
    if not (query_match or category_match or title_score > 0.2):
        r_type = 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return r_type


def reward(product: Product, goal: dict[str, Any], selected: dict[str, str]) -> tuple[float, dict[str, Any]]:
    """WebShop's ``get_reward`` for buying ``product`` with the ``selected`` options (name -> value)."""
    listing = _norm(f"{product.title} {' '.join(product.features)} {product.description}")
    attributes = {_norm(a) for a in product.attributes}
    attribute_matches = sum(1 for a in goal["attributes"] if _norm(a) in attributes or _norm(a) in listing)
    chosen = {_norm(v) for v in selected.values()}
    option_matches = sum(1 for v in goal["options"].values() if _norm(v) in chosen)
    price_ok = product.price <= goal["price_upper"]
    r_type = type_reward(product, goal)
    total = (attribute_matches + option_matches + price_ok) / (
        len(goal["attributes"]) + len(goal["options"]) + 1
    )
    info = {
        "r_type": r_type,
        "r_att": attribute_matches / len(goal["attributes"]),
        "r_option": option_matches / len(goal["options"]) if goal["options"] else None,
        "r_price": price_ok,
    }
    return total * r_type, info
