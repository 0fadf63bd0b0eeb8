"""Built-in environments; importing this package registers their ids."""

import gem_core.envs.code
import gem_core.envs.games
import gem_core.envs.logic
import gem_core.envs.math
import gem_core.envs.qa
import gem_core.envs.reasoning_gym  # noqa: F401
