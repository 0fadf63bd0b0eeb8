"""The reference gem's ``gem.tools.python_code_tool``: ``PythonCodeTool``, gem_core's ``PythonTool`` with the
reference's constructor and methods (``tool_type = "python_code"``, ``instruction_string()``,
``execute_action(action) -> (is_valid, has_error, observation, parsed_action)``).

The code always runs in gem_core's sandbox, whatever ``sandbox_type`` says, and its output is gem_core's
(``Code execution result:`` then stdout, stderr and any abnormal exit): the whole stderr is shown, so
``keep_error_last_line`` changes nothing (as for ``WRAPPER_FACTORY``'s ``..._last_line_error``).
"""

from __future__ import annotations

from typing import Any

from gem_core.tools.base_tool import ReferenceToolAPI
from gem_core.tools.python import PythonTool


class PythonCodeTool(ReferenceToolAPI, PythonTool):
    tool_type = "python_code"

    def __init__(
        self, timeout: int = 5, sandbox_type: str = "none", keep_error_last_line: bool = False, **kwargs: Any
    ):
        super().__init__(timeout=timeout, **kwargs)
        self.sandbox_type = sandbox_type
        self.keep_error_last_line = keep_error_last_line
