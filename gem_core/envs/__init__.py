"""Built-in environments; importing this package registers their ids."""

import gem_core.envs.code  # noqa: F401
import gem_core.envs.games  # noqa: F401
import gem_core.envs.geometry  # noqa: F401
import gem_core.envs.logic  # noqa: F401
import gem_core.envs.math  # noqa: F401
import gem_core.envs.multiagent  # noqa: F401
import gem_core.envs.qa  # noqa: F401
import gem_core.envs.reasoning_gym  # noqa: F401
import gem_core.envs.terminal  # noqa: F401
