"""A pure-torch stand-in for the ``flash_attn`` names OpenRLHF 0.11.2 imports at module level (CPU harness only).

``openrlhf/models/ring_attn_utils.py:3-4`` imports ``flash_attn.bert_padding`` and
``flash_attn.utils.distributed`` unconditionally, and ``openrlhf.models.actor`` imports that module, so
nothing of OpenRLHF's trainer imports without flash-attn (whose build needs CUDA). The functions are used
only with ``--ds.packing_samples`` / ring attention, which the CPU run leaves off; the padding helpers are
written out anyway (plain indexing), ``all_gather`` (ring attention only) refuses.
This package is not ``flash_attn``: transformers finds no ``flash_attn`` distribution and never offers
``flash_attention_2`` (the run passes ``--ds.attn_implementation sdpa``).
"""

__version__ = "0.0.0+gem-cpu-harness"
