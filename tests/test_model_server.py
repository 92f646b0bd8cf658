"""The scripted model server, driven by the real openai client (3.x on httpx2).

Besides checking the fake, these tests pin down how the SDK itself reacts to bad replies
(retries, timeouts, malformed bodies), which the worker's tool loop has to handle.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

import httpx2
import openai
import pytest
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionFunctionToolParam,
    ChatCompletionMessageFunctionToolCall,
    ChatCompletionMessageParam,
)

from tests.support.model_server import (
    NO_REPLY_MESSAGE,
    Reply,
    ScriptedModel,
    error,
    last_user_text,
    raw,
    slow,
    text,
    tool_calls,
    trickle,
)

TOOLS: list[ChatCompletionFunctionToolParam] = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file from the repository.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    }
]

MakeClient = Callable[..., openai.OpenAI]


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel() as server:
        yield server


@pytest.fixture
def make_client(model: ScriptedModel) -> Iterator[MakeClient]:
    clients: list[openai.OpenAI] = []

    def make(**kwargs: Any) -> openai.OpenAI:
        options: dict[str, Any] = {"base_url": model.base_url, "api_key": "test", "max_retries": 0}
        options.update(kwargs)
        client = openai.OpenAI(**options)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


def ask(client: openai.OpenAI, question: str, **kwargs: Any) -> ChatCompletion:
    completion = client.chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": question}], **kwargs
    )
    return cast(ChatCompletion, completion)  # **kwargs hides the non-streaming overload


# -- normal replies ---------------------------------------------------------------------


def test_text_reply_comes_back_and_request_is_recorded(model: ScriptedModel, make_client: MakeClient) -> None:
    model.enqueue(text("The answer is 42."))
    client = make_client()

    completion = client.chat.completions.create(
        model="gpt-test",
        messages=[
            {"role": "system", "content": "You answer questions about code."},
            {"role": "user", "content": "What is the answer?"},
        ],
        tools=TOOLS,
        tool_choice="auto",
    )

    assert completion.choices[0].message.content == "The answer is 42."
    assert completion.choices[0].finish_reason == "stop"
    assert completion.choices[0].message.tool_calls is None
    assert completion.model == "gpt-test"  # echoed from the request
    assert completion.object == "chat.completion"
    usage = completion.usage
    assert usage is not None
    assert usage.prompt_tokens > 0 and usage.completion_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert completion._request_id == "req_1"

    assert len(model.requests) == 1
    sent = model.requests[0]
    assert sent["model"] == "gpt-test"
    assert sent["messages"][-1] == {"role": "user", "content": "What is the answer?"}
    assert sent["tools"] == TOOLS
    assert sent["tool_choice"] == "auto"
    assert model.headers[0]["authorization"] == "Bearer test"
    assert model.headers[0]["x-stainless-retry-count"] == "0"
    assert model.pending == 0
    assert model.failures == []


def test_parallel_tool_calls_have_distinct_ids_and_json_arguments(
    model: ScriptedModel, make_client: MakeClient
) -> None:
    model.enqueue(
        tool_calls(
            ("read_file", {"path": "a.py"}), ("read_file", {"path": "b/ü.py"}), ("grep", '{"pattern": ')
        ),
        tool_calls(("read_file", {"path": "c.py"}), content="One more."),
    )
    client = make_client()

    first = ask(client, "Compare a and b", tools=TOOLS).choices[0]
    second = ask(client, "And c?", tools=TOOLS).choices[0]

    assert first.finish_reason == "tool_calls"
    assert first.message.content is None
    calls = first.message.tool_calls
    assert calls is not None and len(calls) == 3
    assert [call.type for call in calls] == ["function"] * 3
    functions = [call.function for call in calls if isinstance(call, ChatCompletionMessageFunctionToolCall)]
    assert [f.name for f in functions] == ["read_file", "read_file", "grep"]
    assert json.loads(functions[0].arguments) == {"path": "a.py"}
    assert json.loads(functions[1].arguments) == {"path": "b/ü.py"}
    assert functions[2].arguments == '{"pattern": '  # verbatim, malformed on purpose
    assert second.message.content == "One more."
    assert second.message.tool_calls is not None
    ids = [call.id for call in calls] + [call.id for call in second.message.tool_calls]
    assert ids == ["call_1", "call_2", "call_3", "call_4"]  # unique across the whole server


def test_tool_loop_round_trip_and_all_text_sent(model: ScriptedModel, make_client: MakeClient) -> None:
    model.enqueue(tool_calls(("read_file", {"path": "config.py"})), text("It reads the config."))
    client = make_client()
    messages: list[ChatCompletionMessageParam] = [
        {"role": "user", "content": [{"type": "text", "text": "What does config.py do?"}]}
    ]

    turn = client.chat.completions.create(model="gpt-test", messages=messages, tools=TOOLS).choices[0]
    assert turn.message.tool_calls is not None
    call = turn.message.tool_calls[0]
    messages.append(cast(ChatCompletionMessageParam, turn.message.model_dump(exclude_none=True)))
    messages.append({"role": "tool", "tool_call_id": call.id, "content": "TOKEN = load('xoxb-redacted')"})
    final = client.chat.completions.create(model="gpt-test", messages=messages, tools=TOOLS).choices[0]

    assert final.message.content == "It reads the config."
    assert model.requests[1]["messages"][1]["tool_calls"][0]["id"] == "call_1"
    assert model.requests[1]["messages"][2] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "TOKEN = load('xoxb-redacted')",
    }
    sent = model.all_text_sent()
    assert "What does config.py do?" in sent  # list-of-parts content
    assert "xoxb-redacted" in sent  # tool results
    assert '{"path": "config.py"}' in sent  # tool-call arguments echoed back in history
    assert "sk-live-secret" not in sent


# -- errors and retries -----------------------------------------------------------------


def test_429_then_success_is_retried_by_the_sdk(model: ScriptedModel, make_client: MakeClient) -> None:
    model.enqueue(error(429, headers={"retry-after": "0"}), text("after the rate limit"))
    client = make_client(max_retries=2)

    started = time.monotonic()
    completion = ask(client, "hi")

    assert completion.choices[0].message.content == "after the rate limit"
    assert [h["x-stainless-retry-count"] for h in model.headers] == ["0", "1"]
    assert len(model.requests) == 2
    # `retry-after: 0` is not "retry now": the SDK only honours 0 < delay <= 120 s and otherwise
    # falls back to its 0.5 s (minus <=25% jitter) backoff. Use retry-after-ms for faster tests.
    assert time.monotonic() - started > 0.3  # a lower bound holds on any machine, however busy


def test_retry_after_ms_sets_the_wait_between_retries(model: ScriptedModel, make_client: MakeClient) -> None:
    wait = {"retry-after-ms": "1500"}
    model.enqueue(error(429, headers=wait), error(429, headers=wait), text("ok"))
    started = time.monotonic()
    assert ask(make_client(max_retries=2), "hi").choices[0].message.content == "ok"
    # honoured: two waits of 1.5 s; the SDK's own backoff would be at most 0.5 + 1.0 s in all
    # (a lower bound holds on any machine)
    assert time.monotonic() - started >= 3.0
    assert [h["x-stainless-retry-count"] for h in model.headers] == ["0", "1", "2"]


def test_500_without_retries_raises_internal_server_error(
    model: ScriptedModel, make_client: MakeClient
) -> None:
    model.enqueue(error(500), text("never reached"))
    with pytest.raises(openai.InternalServerError) as caught:
        ask(make_client(max_retries=0), "hi")
    assert caught.value.status_code == 500
    assert len(model.requests) == 1
    assert model.pending == 1


def test_401_raises_authentication_error(model: ScriptedModel, make_client: MakeClient) -> None:
    body = {
        "error": {"message": "Incorrect API key", "type": "invalid_request_error", "code": "invalid_api_key"}
    }
    model.enqueue(error(401, body))
    with pytest.raises(openai.AuthenticationError) as caught:
        ask(make_client(max_retries=2), "hi")  # 401 is never retried
    assert caught.value.code == "invalid_api_key"
    assert "Incorrect API key" in caught.value.message
    assert len(model.requests) == 1


def test_error_with_a_string_body_becomes_the_message(model: ScriptedModel, make_client: MakeClient) -> None:
    model.enqueue(error(400, "This model's maximum context length is 8192 tokens."))
    with pytest.raises(openai.BadRequestError) as caught:
        ask(make_client(), "hi")
    assert "maximum context length" in caught.value.message
    assert caught.value.type == "invalid_request_error"


def test_slow_reply_times_out(model: ScriptedModel, make_client: MakeClient) -> None:
    model.enqueue(slow(3600, text("too late")))  # without the 0.5 s timeout: the test's timeout
    with pytest.raises(openai.APITimeoutError):
        ask(make_client(timeout=0.5, max_retries=0), "hi")
    assert len(model.requests) == 1  # recorded on arrival, before the delay


def test_slow_reply_does_not_block_other_requests(model: ScriptedModel, make_client: MakeClient) -> None:
    quick_done = threading.Event()

    def answer(body: dict[str, Any]) -> Reply:
        if last_user_text(body) == "slow":
            quick_done.wait(60)  # held until the quick one is answered (the bound: a hang guard)
            return text("late")
        return text("fast")

    model.set_handler(answer)
    client = make_client(timeout=120)
    finished: list[str] = []

    def ask_slowly() -> None:
        finished.append(ask(client, "slow").choices[0].message.content or "")

    worker = threading.Thread(target=ask_slowly)
    worker.start()
    model.wait_for_requests(1)
    assert ask(client, "quick").choices[0].message.content == "fast"
    finished.append("fast")
    quick_done.set()
    worker.join(timeout=60)
    assert finished == ["fast", "late"]  # the quick one did not wait behind the slow one


# -- malformed replies: what the SDK actually does ----------------------------------------


def test_malformed_json_raises_a_plain_json_decode_error(
    model: ScriptedModel, make_client: MakeClient
) -> None:
    model.enqueue(raw('{"id": "chatcmpl-1", "choices": ['))
    # Not an openai.APIError: the SDK calls response.json() unguarded, so the worker must catch
    # ValueError (JSONDecodeError subclasses it) as well as openai.OpenAIError.
    with pytest.raises(json.JSONDecodeError):
        ask(make_client(), "hi")
    assert not issubclass(json.JSONDecodeError, openai.OpenAIError)


def test_non_json_content_type_returns_a_str_unless_strict(
    model: ScriptedModel, make_client: MakeClient
) -> None:
    model.enqueue(raw("<html>502 Bad Gateway</html>", content_type="text/html"))
    result: object = ask(make_client(), "hi")
    assert result == "<html>502 Bad Gateway</html>"  # silently a str, not a ChatCompletion

    model.enqueue(raw("<html>502 Bad Gateway</html>", content_type="text/html"))
    with pytest.raises(openai.APIResponseValidationError):
        ask(make_client(_strict_response_validation=True), "hi")


def test_wrong_shape_is_not_validated_unless_strict(model: ScriptedModel, make_client: MakeClient) -> None:
    model.enqueue(raw('{"unexpected": true}'))
    completion = ask(make_client(), "hi")
    assert completion.choices is None  # constructed without validation

    model.enqueue(raw('{"unexpected": true}'))
    with pytest.raises(openai.APIResponseValidationError):
        ask(make_client(_strict_response_validation=True), "hi")


# -- scripting edge cases -------------------------------------------------------------------


def test_unscripted_request_gets_500_and_is_recorded(model: ScriptedModel, make_client: MakeClient) -> None:
    with pytest.raises(openai.InternalServerError) as caught:
        ask(make_client(max_retries=0), "nobody scripted me")
    assert NO_REPLY_MESSAGE in caught.value.message
    assert last_user_text(model.requests[0]) == "nobody scripted me"
    assert model.failures == [NO_REPLY_MESSAGE]


def test_set_handler_answers_concurrent_questions_by_content(
    model: ScriptedModel, make_client: MakeClient
) -> None:
    model.set_handler(lambda body: text(f"answer to {last_user_text(body)}"))
    client = make_client()
    questions = [f"question {i}" for i in range(8)]

    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(lambda q: ask(client, q).choices[0].message.content, questions))

    assert answers == [f"answer to {q}" for q in questions]
    assert sorted(last_user_text(body) for body in model.requests) == sorted(questions)


def test_queue_is_used_before_the_handler(make_client: MakeClient) -> None:
    with ScriptedModel(default=text("default")) as server:
        server.enqueue(text("scripted"))
        client = make_client(base_url=server.base_url)
        assert [ask(client, "q").choices[0].message.content for _ in range(3)] == [
            "scripted",
            "default",
            "default",
        ]


def test_handler_errors_fail_loudly(model: ScriptedModel, make_client: MakeClient) -> None:
    def broken(body: dict[str, Any]) -> Reply:
        raise KeyError("oops")

    model.set_handler(broken)
    with pytest.raises(openai.InternalServerError, match="handler raised"):
        ask(make_client(), "hi")
    assert model.failures and "KeyError" in model.failures[0]


def test_a_streamed_reply_arrives_as_chunks_with_tool_call_fragments_and_a_usage_chunk(
    model: ScriptedModel, make_client: MakeClient
) -> None:
    model.enqueue(
        tool_calls(
            ("read_file", {"path": "README.md"}), ("read_file", {"path": "b.py"}), content="Let me look."
        )
    )
    stream = make_client().chat.completions.create(
        model="gpt-test",
        messages=[{"role": "user", "content": "hi"}],
        tools=TOOLS,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text_parts = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert "".join(text_parts) == "Let me look." and len(text_parts) > 1  # in pieces
    fragments = [t for c in chunks if c.choices for t in c.choices[0].delta.tool_calls or []]
    assert [f.index for f in fragments if f.id] == [0, 1]  # id and name come first, once per call
    arguments = ["".join(f.function.arguments or "" for f in fragments if f.index == i) for i in (0, 1)]
    assert [json.loads(a) for a in arguments] == [{"path": "README.md"}, {"path": "b.py"}]
    assert chunks[-1].choices == [] and chunks[-1].usage is not None  # the usage chunk
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"


def test_strict_modes_refuse_what_real_servers_refuse_without_consuming_the_script(
    make_client: MakeClient,
) -> None:
    with ScriptedModel(strict={"null_content", "tool_choice_required_silent"}) as strict:
        strict.enqueue(text("unused"))
        client = make_client(base_url=strict.base_url)
        with pytest.raises(openai.InternalServerError):
            ask(client, "hi", tools=TOOLS, tool_choice="required")
        history: list[ChatCompletionMessageParam] = [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "x"},
        ]
        with pytest.raises(openai.InternalServerError, match="Input should be a valid string"):
            client.chat.completions.create(model="m", messages=history)
        assert strict.pending == 1 and len(strict.requests) == 2
    with pytest.raises(ValueError, match="unknown strict mode"):
        ScriptedModel(strict={"no_such_mode"})


def test_a_context_window_errors_like_openai_or_drops_the_oldest_messages_like_ollama(
    make_client: MakeClient,
) -> None:
    long = "word " * 400  # ~500 tokens at 4 characters a token
    messages: list[ChatCompletionMessageParam] = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": long},
        {"role": "user", "content": "the question"},
    ]
    with ScriptedModel(text("ok"), context_tokens=200) as erroring:
        with pytest.raises(openai.BadRequestError, match="maximum context length is 200 tokens") as caught:
            make_client(base_url=erroring.base_url).chat.completions.create(model="m", messages=messages)
        assert isinstance(caught.value.body, dict) and caught.value.body["code"] == "context_length_exceeded"
    with ScriptedModel(text("ok"), context_tokens=200, context_overflow="truncate") as ollama:
        make_client(base_url=ollama.base_url).chat.completions.create(model="m", messages=messages)
        seen = [m["content"] for m in ollama.seen[0]["messages"]]
        assert seen == ["be brief", "the question"]  # the oldest non-system message silently gone


def test_metadata_routes_answer_like_ollama_vllm_and_llama_server(make_client: MakeClient) -> None:
    show = {"parameters": "num_ctx 8192", "model_info": {"qwen2.context_length": 32768}}
    with ScriptedModel(
        ollama_show=show,
        props={"default_generation_settings": {"n_ctx": 4096}},
        model_fields={"max_model_len": 16384},
    ) as server:
        client = make_client(base_url=server.base_url)
        assert client.models.list().data[0].model_extra == {"max_model_len": 16384}
        root = server.base_url.removesuffix("/v1")
        assert httpx2.post(f"{root}/api/show", json={"model": "m"}).json() == show
        assert httpx2.get(f"{root}/props").json()["default_generation_settings"]["n_ctx"] == 4096
        assert httpx2.get(f"{root}/api/ps").status_code == 404  # not given: like a server without it
        assert "POST /api/show" in server.metadata_requests


def test_a_trickled_reply_arrives_a_byte_at_a_time(model: ScriptedModel, make_client: MakeClient) -> None:
    model.enqueue(trickle(0.05, text("slowly")))
    started = time.monotonic()
    assert ask(make_client(), "hi").choices[0].message.content == "slowly"
    assert time.monotonic() - started > 0.05 * 100  # the body is a few hundred bytes


def test_models_list(model: ScriptedModel, make_client: MakeClient) -> None:
    client = make_client()
    assert [m.id for m in client.models.list()] == ["scripted-model"]
    assert client.models.retrieve("gpt-test").id == "gpt-test"
    assert model.requests == []  # only chat requests are recorded


def test_wait_for_requests(model: ScriptedModel, make_client: MakeClient) -> None:
    model.enqueue(slow(0.2, text("done")))
    client = make_client()
    thread = threading.Thread(target=ask, args=(client, "hi"))
    thread.start()
    model.wait_for_requests(1, timeout=60)
    thread.join(timeout=60)
    with pytest.raises(TimeoutError, match="expected 2 requests"):
        model.wait_for_requests(2, timeout=0.05)


def test_close_is_idempotent_and_interrupts_slow_replies(make_client: MakeClient) -> None:
    server = ScriptedModel()
    server.enqueue(slow(30, text("never")))
    client = make_client(base_url=server.base_url, timeout=10)
    errors: list[BaseException] = []

    def call() -> None:
        try:
            ask(client, "hi")
        except openai.APIError as exc:
            errors.append(exc)

    thread = threading.Thread(target=call)
    thread.start()
    server.wait_for_requests(1)
    server.close()
    server.close()
    thread.join(timeout=30)
    # the connection was cut (not the client's 10 s timeout, not the 30 s reply)
    assert len(errors) == 1 and type(errors[0]) is openai.APIConnectionError


def test_reply_constructors_validate() -> None:
    with pytest.raises(ValueError):
        tool_calls()
    with pytest.raises(ValueError):
        error(200)
    with pytest.raises(ValueError):
        slow(-1, text("x"))
    assert slow(0.1, slow(0.2, text("x"))).delay == pytest.approx(0.3)
