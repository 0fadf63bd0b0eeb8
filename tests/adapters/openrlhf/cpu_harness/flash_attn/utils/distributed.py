"""``flash_attn.utils.distributed`` (see the package docstring): ring attention only."""


def all_gather(*args, **kwargs):
    raise NotImplementedError("the CPU harness's flash_attn stand-in has no ring attention")
