"""Chat templates with tool use, written after each family's published template and tool-call format
(no model of these families ships offline), applied in the tests to the offline SmolLM2 tokenizer.

Each keeps what decides the token layout: the system block with the tools and the call format the
model is told to use, the assistant turn, the tool role's rendering and the generation prompt."""

from tests.adapters.chat_templates import QWEN3_TEMPLATE

# The parts of chat_templates.QWEN3_TEMPLATE that Qwen3's tool-using template extends: the system
# block (with the tools) and the end of the message loop (before which the tool turn goes).
QWEN3_SYSTEM = """
{%- if messages[0].role == 'system' %}
    {{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}
{%- endif %}"""
QWEN3_LOOP_END = """
    {%- endif %}
{%- endfor %}"""

# Qwen2.5 (and Hermes 2 Pro / 3): a default system prompt; calls are <tool_call> JSON blocks; tool
# results go in a user turn as <tool_response> blocks (consecutive results share one turn).
QWEN25_TEMPLATE = """
{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0]['role'] == 'system' %}{{- messages[0]['content'] }}{%- else %}{{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}{%- endif %}
    {{- "\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}
    {%- for tool in tools %}{{- "\\n" }}{{- tool | tojson }}{%- endfor %}
    {{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call><|im_end|>\\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}
    {%- else %}
        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}{{- '\\n' + message.content }}{%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}
            {{- '\\n<tool_call>\\n{"name": "' }}{{- tool_call.name }}{{- '", "arguments": ' }}{{- tool_call.arguments | tojson }}{{- '}\\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}{{- '<|im_start|>user' }}{%- endif %}
        {{- '\\n<tool_response>\\n' }}{{- message.content }}{{- '\\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}{{- '<|im_end|>\\n' }}{%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}
"""

# Qwen3: as Qwen2.5 for tools, plus its thinking: assistant turns before the last real user query lose
# their <think> block, later ones are re-rendered as "<think>\n...\n</think>\n\n..." (tool results are
# not queries, so a tool-calling stretch keeps its thinking).
_QWEN3_TOOLS_SYSTEM = """
{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}
    {{- "# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}
    {%- for tool in tools %}{{- "\\n" }}{{- tool | tojson }}{%- endfor %}
    {{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call><|im_end|>\\n" }}
{%- elif messages[0].role == 'system' %}
    {{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}
{%- endif %}"""
_QWEN3_TOOL_TURN = """
    {%- elif message.role == "tool" %}
        {%- if loop.first or (messages[loop.index0 - 1].role != "tool") %}{{- '<|im_start|>user' }}{%- endif %}
        {{- '\\n<tool_response>\\n' }}{{- content }}{{- '\\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}{{- '<|im_end|>\\n' }}{%- endif %}"""
_before, _, _after = QWEN3_TEMPLATE.replace(QWEN3_SYSTEM, _QWEN3_TOOLS_SYSTEM).rpartition(QWEN3_LOOP_END)
QWEN3_TOOLS_TEMPLATE = _before + _QWEN3_TOOL_TURN + QWEN3_LOOP_END + _after
assert "# Tools" in QWEN3_TOOLS_TEMPLATE and QWEN3_TOOLS_TEMPLATE.count("<tool_response>\\n") == 1

# Qwen3-Coder: the same turns and tool role; calls are XML, <function=NAME><parameter=P>value</parameter>.
QWEN3_CODER_TEMPLATE = """
{%- if messages[0].role == 'system' %}{%- set system_message = messages[0].content %}{%- set loop_messages = messages[1:] %}
{%- else %}{%- set system_message = 'You are Qwen, a helpful AI assistant that can interact with a computer to solve tasks.' %}{%- set loop_messages = messages %}{%- endif %}
{{- '<|im_start|>system\\n' + system_message }}
{%- if tools %}
    {{- "\\n\\n# Tools\\n\\nYou have access to the following functions:\\n\\n<tools>" }}
    {%- for tool in tools %}{{- "\\n<function>\\n<name>" ~ tool.name ~ "</name>\\n</function>" }}{%- endfor %}
    {{- "\\n</tools>" }}
{%- endif %}
{{- '\\n\\nIf you choose to call a function ONLY reply in the following format with NO suffix:\\n\\n<tool_call>\\n<function=example_function_name>\\n<parameter=example_parameter_1>\\nvalue_1\\n</parameter>\\n</function>\\n</tool_call><|im_end|>\\n' }}
{%- for message in loop_messages %}
    {%- if message.role == "assistant" or message.role == "user" %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}
    {%- elif message.role == "tool" %}
        {%- if loop.previtem and loop.previtem.role != "tool" %}{{- '<|im_start|>user\\n' }}{%- endif %}
        {{- '<tool_response>\\n' }}{{- message.content }}{{- '\\n</tool_response>\\n' }}
        {%- if not loop.last and loop.nextitem.role != "tool" %}{{- '<|im_end|>\\n' }}{%- elif loop.last %}{{- '<|im_end|>\\n' }}{%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}
"""

# Llama 3.1: header blocks; the model answers a call as {"name": ..., "parameters": ...}; tool
# results are ipython turns whose content goes through tojson; assistant content is trimmed.
LLAMA31_TEMPLATE = """
{%- if messages[0]['role'] == 'system' %}{%- set system_message = messages[0]['content']|trim %}{%- set messages = messages[1:] %}
{%- else %}{%- set system_message = "" %}{%- endif %}
{{- "<|start_header_id|>system<|end_header_id|>\\n\\n" }}
{%- if tools is not none and tools %}{{- "Environment: ipython\\n" }}{%- endif %}
{{- "Cutting Knowledge Date: December 2023\\nToday Date: 26 Jul 2024\\n\\n" }}
{%- if tools is not none and tools %}
    {{- "Given the following functions, please respond with a JSON for a function call with its proper arguments that best answers the given prompt.\\n\\nRespond in the format {\\"name\\": function name, \\"parameters\\": dictionary of argument name and its value}. Do not use variables.\\n\\n" }}
    {%- for t in tools %}{{- t | tojson(indent=4) }}{{- "\\n\\n" }}{%- endfor %}
{%- endif %}
{{- system_message }}
{{- "<|eot_id|>" }}
{%- for message in messages %}
    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}
        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}
    {%- elif 'tool_calls' in message %}
        {%- set tool_call = message.tool_calls[0].function %}
        {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}
        {{- '{"name": "' + tool_call.name + '", "parameters": ' }}{{- tool_call.arguments | tojson }}{{- "}" }}
        {{- "<|eot_id|>" }}
    {%- elif message.role == "tool" or message.role == "ipython" %}
        {{- "<|start_header_id|>ipython<|end_header_id|>\\n\\n" }}
        {%- if message.content is mapping or message.content is iterable %}{{- message.content | tojson }}{%- else %}{{- message.content }}{%- endif %}
        {{- "<|eot_id|>" }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}
"""

# Mistral (v3 tokenizer format): [INST] ... [/INST] user turns, the answer then the end-of-sequence
# token, calls as [TOOL_CALLS] followed by a JSON array, results as [TOOL_RESULTS] {"content": ...}.
MISTRAL_TEMPLATE = """
{%- if messages[0]['role'] == 'system' %}{%- set system_message = messages[0]['content'] %}{%- set loop_messages = messages[1:] %}
{%- else %}{%- set loop_messages = messages %}{%- endif %}
{{- bos_token }}
{%- for message in loop_messages %}
    {%- if message['role'] == 'user' %}
        {%- if tools is not none and tools and loop.last %}
            {{- '[AVAILABLE_TOOLS] [' }}{%- for tool in tools %}{{- tool | tojson }}{%- if not loop.last %}{{- ', ' }}{%- endif %}{%- endfor %}{{- '][/AVAILABLE_TOOLS]' }}
        {%- endif %}
        {%- if loop.first and system_message is defined %}{{- '[INST] ' + system_message + '\\n\\n' + message['content'] + '[/INST]' }}
        {%- else %}{{- '[INST] ' + message['content'] + '[/INST]' }}{%- endif %}
    {%- elif message.tool_calls is defined and message.tool_calls is not none %}
        {{- '[TOOL_CALLS] [' }}
        {%- for tool_call in message.tool_calls %}{{- '{"name": "' + tool_call.function.name + '", "arguments": ' + tool_call.function.arguments | tojson + '}' }}{%- endfor %}
        {{- ']' + eos_token }}
    {%- elif message['role'] == 'assistant' %}
        {{- message['content'] + eos_token }}
    {%- elif message['role'] == 'tool_results' or message['role'] == 'tool' %}
        {{- '[TOOL_RESULTS] {"content": ' + message['content'] | tojson }}
        {%- if message.tool_call_id is defined %}{{- ', "call_id": "' + message.tool_call_id + '"' }}{%- endif %}
        {{- '}[/TOOL_RESULTS]' }}
    {%- endif %}
{%- endfor %}
"""

# A template with no tool role: anything but user/assistant/system is an error (Gemma-style).
NO_TOOL_ROLE_TEMPLATE = """
{%- for message in messages %}
    {%- if message.role not in ['user', 'assistant', 'system'] %}{{- raise_exception('unsupported role ' + message.role) }}{%- endif %}
    {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}
"""
