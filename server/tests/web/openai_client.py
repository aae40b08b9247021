"""The official `openai` package against the model meter, as a candidate's
agent would use it. Run by server/tests/web/meter.rs with GATEHOUSE_BASE
(the meter's /v1 URL), GATEHOUSE_KEY (an assignment with `model_calls = 5`)
and GATEHOUSE_CLOSED_KEY (an assignment whose model window is closed).
Prints one line per check; any failure raises (exit 1)."""

import json
import os

import openai

base = os.environ["GATEHOUSE_BASE"]
client = openai.OpenAI(base_url=base, api_key=os.environ["GATEHOUSE_KEY"])
messages = [{"role": "user", "content": "hello"}]

# 1. Non-streaming.
r = client.chat.completions.create(model="fake-model", messages=messages)
assert r.choices[0].message.content == "Hello there", r
assert r.usage.prompt_tokens == 10 and r.usage.completion_tokens == 5, r.usage
print("non-streaming ok")

# 2. Streaming with usage asked for: the last chunk carries it.
chunks = list(client.chat.completions.create(model="fake-model", messages=messages, stream=True, stream_options={"include_usage": True}))
text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
assert text == "Hello there", text
assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens == 15, chunks[-1]
print("streaming with usage ok")

# 3. Streaming without: the meter still counts it, and the client sees no usage chunk.
chunks = list(client.chat.completions.create(model="fake-model", messages=messages, stream=True))
assert "".join(c.choices[0].delta.content or "" for c in chunks) == "Hello there"
assert all(c.usage is None for c in chunks), chunks
print("streaming without usage ok")

# 4. A tool call.
tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
r = client.chat.completions.create(model="fake-model", messages=messages, tools=tools)
call = r.choices[0].message.tool_calls[0]
assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": "Paris"}, r
assert r.choices[0].finish_reason == "tool_calls"
print("tool call ok")

# 5. The fifth call uses the budget up; the sixth is a RateLimitError naming
# the cap, raised at once (the SDK does not retry it: x-should-retry: false).
client.chat.completions.create(model="fake-model", messages=messages)
try:
    client.chat.completions.create(model="fake-model", messages=[{"role": "user", "content": "one too many"}])
    raise AssertionError("the sixth call was not refused")
except openai.RateLimitError as e:
    assert e.status_code == 429
    assert e.body["type"] == "budget_exceeded" and e.body["cap"] == "model_calls" and e.body["limit"] == 5, e.body
    assert e.response.headers["x-should-retry"] == "false"
print("rate limit ok")

# 6. An unknown key is an AuthenticationError.
try:
    openai.OpenAI(base_url=base, api_key="gh-" + "0" * 40).chat.completions.create(model="fake-model", messages=messages)
    raise AssertionError("an unknown key was accepted")
except openai.AuthenticationError as e:
    assert e.status_code == 401 and e.body["type"] == "invalid_api_key", e.body
print("authentication ok")

# 7. A closed model window is a PermissionDeniedError.
try:
    openai.OpenAI(base_url=base, api_key=os.environ["GATEHOUSE_CLOSED_KEY"]).chat.completions.create(model="fake-model", messages=messages)
    raise AssertionError("the closed window let a call through")
except openai.PermissionDeniedError as e:
    assert e.status_code == 403 and e.body["type"] == "model_window_closed", e.body
print("permission denied ok")
