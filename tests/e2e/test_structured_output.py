"""Structured output through `memra serve` and the official openai client (run by tests/e2e/run.sh).

The fixture model is tiny and random, so what it writes is the grammar's doing: every output is
parsed and validated with the `jsonschema` package (or matched against its regex / choices).
Sampled requests use fixed seeds, so the outputs (and these tests) are deterministic.
"""
import json
import re
import threading

import jsonschema
import openai
import pytest

# The server's address, the model name and the client fixture are the main suite's.
from test_openai_client import MODEL, client, user  # noqa: F401 - client is a pytest fixture

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 8},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "role": {"enum": ["admin", "user", "guest"]},
        "active": {"type": "boolean"},
        "scores": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9}, "maxItems": 3},
        "email": {"type": "string", "format": "email"},
        "nick": {"anyOf": [{"type": "string", "maxLength": 4}, {"type": "null"}]},
    },
    "required": ["name", "age", "role", "active"],
    "additionalProperties": False,
}

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 10}, "unit": {"enum": ["c", "f"]},
                           "days": {"type": "integer", "minimum": 1, "maximum": 7}},
            "required": ["city", "unit"],
            "additionalProperties": False,
        },
    },
}
TIME_TOOL = {"type": "function", "function": {"name": "get_time", "parameters": {
    "type": "object", "properties": {"zone": {"enum": ["UTC", "CET"]}}, "required": ["zone"], "additionalProperties": False}}}


def validate(text, schema):
    value = json.loads(text)
    jsonschema.validate(value, schema, format_checker=jsonschema.FormatChecker())
    return value


@pytest.mark.parametrize("seed", [1, 2])
def test_json_schema_outputs_validate(client, seed):
    r = client.chat.completions.create(
        model=MODEL, messages=user("Describe a person as JSON"), max_tokens=1500, temperature=1.0, seed=seed,
        response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON, "strict": True}})
    c = r.choices[0]
    assert c.finish_reason == "stop", c.message.content
    validate(c.message.content, PERSON)


def test_json_schema_stream_equals_whole_and_n_choices_validate(client):
    kwargs = dict(model=MODEL, messages=user("JSON"), max_tokens=1500, temperature=0.9, seed=42,
                  response_format={"type": "json_schema", "json_schema": {"name": "p", "schema": PERSON}})
    whole = client.chat.completions.create(n=3, **kwargs)
    assert len(whole.choices) == 3
    for c in whole.choices:
        assert c.finish_reason == "stop"
        validate(c.message.content, PERSON)
    chunks = list(client.chat.completions.create(stream=True, **kwargs))
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices and ch.choices[0].index == 0)
    assert text == whole.choices[0].message.content


def test_constrained_request_is_exact_alone_and_batched(client):
    kwargs = dict(model=MODEL, messages=user("Person JSON"), max_tokens=1500, temperature=1.0, seed=77,
                  extra_body={"guided_json": PERSON})
    alone = client.chat.completions.create(**kwargs).choices[0].message.content
    results = {}

    def run(key, **kw):
        results[key] = client.chat.completions.create(**kw).choices[0].message.content

    threads = [threading.Thread(target=run, args=("c",), kwargs=kwargs)]
    for i in range(4):
        threads.append(threading.Thread(target=run, args=(f"free{i}",), kwargs=dict(
            model=MODEL, messages=user(f"Story {i}"), max_tokens=40, temperature=0.7 * (i % 2), seed=i)))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results["c"] == alone
    validate(alone, PERSON)


def test_json_object(client):
    r = client.chat.completions.create(model=MODEL, messages=user("Any JSON object"), max_tokens=1500,
                                       temperature=1.0, seed=5, response_format={"type": "json_object"})
    c = r.choices[0]
    assert c.finish_reason == "stop", c.message.content
    assert isinstance(json.loads(c.message.content), dict)


def test_guided_regex_choice_and_gbnf(client):
    r = client.completions.create(model=MODEL, prompt="Code:", max_tokens=40, temperature=1.0, seed=3,
                                  extra_body={"guided_regex": r"[A-Z]{3}-\d{2,4}"})
    assert r.choices[0].finish_reason == "stop"
    assert re.fullmatch(r"[A-Z]{3}-\d{2,4}", r.choices[0].text), r.choices[0].text
    r = client.chat.completions.create(model=MODEL, messages=user("yes or no?"), max_tokens=10, temperature=1.0,
                                       seed=4, extra_body={"guided_choice": ["yes", "no", "maybe not"]})
    assert r.choices[0].message.content in ("yes", "no", "maybe not")
    gbnf = 'root ::= "(" item (", " item)* ")"\nitem ::= [a-z]{1,5} | [0-9]+\n'
    r = client.chat.completions.create(model=MODEL, messages=user("A tuple"), max_tokens=200, temperature=1.0,
                                       seed=8, extra_body={"grammar": gbnf})
    assert r.choices[0].finish_reason == "stop"
    assert re.fullmatch(r"\((?:[a-z]{1,5}|[0-9]+)(?:, (?:[a-z]{1,5}|[0-9]+))*\)", r.choices[0].message.content)


@pytest.mark.parametrize("seed", [11])
def test_tool_choice_required_and_named(client, seed):
    r = client.chat.completions.create(model=MODEL, messages=user("Weather in Paris?"), tools=[WEATHER_TOOL, TIME_TOOL],
                                       tool_choice="required", max_tokens=1500, temperature=1.0, seed=seed)
    c = r.choices[0]
    assert c.finish_reason == "tool_calls", c.message.content
    assert c.message.tool_calls
    params = {"get_weather": WEATHER_TOOL["function"]["parameters"], "get_time": TIME_TOOL["function"]["parameters"]}
    for call in c.message.tool_calls:
        validate(call.function.arguments, params[call.function.name])
    r = client.chat.completions.create(model=MODEL, messages=user("Weather?"), tools=[WEATHER_TOOL, TIME_TOOL],
                                       tool_choice={"type": "function", "function": {"name": "get_time"}},
                                       max_tokens=1500, temperature=1.0, seed=seed)
    c = r.choices[0]
    assert c.finish_reason == "tool_calls"
    assert [t.function.name for t in c.message.tool_calls] == ["get_time"]
    validate(c.message.tool_calls[0].function.arguments, params["get_time"])


def test_bad_constraints_are_400(client):
    cases = [
        dict(extra_body={"guided_json": {"type": "object", "properties": {"a": {"not": {"pattern": "^a"}}}}}),
        dict(extra_body={"guided_whitespace_pattern": " "}),
        dict(extra_body={"guided_bogus": 1}),
        dict(extra_body={"grammar": 'root ::= root "x"'}),
        dict(extra_body={"guided_regex": "(a|b)*a(a|b){24}"}),
        dict(response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {"$ref": "#"}}}),
        dict(tool_choice="required"),
    ]
    for kw in cases:
        with pytest.raises(openai.BadRequestError) as e:
            client.chat.completions.create(model=MODEL, messages=user("x"), max_tokens=5, **kw)
        assert e.value.status_code == 400
        assert e.value.body["message"], kw
