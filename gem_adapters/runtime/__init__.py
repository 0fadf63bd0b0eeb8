"""The infrastructure: the rollout driver and its limits (``rollout``, ``rollout_limits``), pinned framework
patches (``patching``), model loading (``models``), weight sync into vLLM (``vllm_weights``), the run log
(``run_log``), timing (``timing``), the allocator setting (``allocator``) and the examples' light first pass
over their command line (``command_line``)."""
