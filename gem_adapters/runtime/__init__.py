"""The infrastructure: the rollout driver and its limits (``rollout``, ``rollout_limits``), pinned framework
patches (``patching``), model loading (``models``), weight sync into vLLM (``vllm_weights``), the run log
(``run_log``), timing (``timing``) and the allocator setting (``allocator``)."""
