"""The official Python A2A client (pip a2a-sdk 1.x) through whole task lifecycles, used by
realClients.test.ts: multi-turn (input-required, then follow-ups), a streaming follow-up, and
cancel, as a plain client sends them (no AMF metadata).

Usage: python3 python_a2a_scenarios.py BASE_URL CASES_JSON
CASES_JSON is a list of {"scenario": "multi-turn"|"stream-follow-up"|"cancel", "binding": "JSONRPC"|
"HTTP+JSON"}. Prints one JSON list: per case its steps, each {"kinds": [...], "state": ..., "text":
...} or {"error": ...}.
"""

import asyncio
import json
import sys
import uuid

import httpx
from a2a.client import ClientConfig, ClientFactory
from a2a.client.card_resolver import A2ACardResolver
from a2a.types.a2a_pb2 import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    TaskState,
)


def only_v1(card: AgentCard) -> AgentCard:
    """A copy of the card with its 1.0 interfaces only (the 0.3 ones are another test's)."""
    copy = AgentCard()
    copy.CopyFrom(card)
    del copy.supported_interfaces[:]
    copy.supported_interfaces.extend(i for i in card.supported_interfaces if i.protocol_version == "1.0")
    return copy


def text_of(parts) -> str:
    return "".join(p.text for p in parts if p.HasField("text"))


def message(text: str, task_id: str = "", context_id: str = "") -> Message:
    m = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)])
    if task_id:
        m.task_id = task_id
    if context_id:
        m.context_id = context_id
    return m


async def send(client, msg: Message, return_immediately: bool = False, stop_after=None) -> dict:
    """One SendMessage (streaming or not, as the client is configured); the events it answered."""
    request = SendMessageRequest(message=msg)
    if return_immediately:
        request.configuration.CopyFrom(SendMessageConfiguration(return_immediately=True))
    kinds, state, answer, task_id, context_id, prompt = [], None, "", "", "", ""
    try:
        async for event in client.send_message(request):
            kind = event.WhichOneof("payload")
            kinds.append(kind)
            if kind == "task":
                task_id, context_id = event.task.id, event.task.context_id
                state = TaskState.Name(event.task.status.state)
                prompt = text_of(event.task.status.message.parts)
                answer = "".join(text_of(a.parts) for a in event.task.artifacts) or answer
            elif kind == "status_update":
                state = TaskState.Name(event.status_update.status.state)
                prompt = text_of(event.status_update.status.message.parts)
            elif kind == "artifact_update":
                chunk = text_of(event.artifact_update.artifact.parts)
                answer = answer + chunk if event.artifact_update.append else chunk
            elif kind == "message":
                answer = text_of(event.message.parts)
            if stop_after and stop_after(kinds, state):
                break
    except Exception as err:  # reported to the test, which asserts on it
        return {"error": f"{type(err).__name__}: {err}", "kinds": kinds}
    return {
        "kinds": kinds,
        "state": state,
        "text": answer,
        "prompt": prompt,
        "task_id": task_id,
        "context_id": context_id,
    }


async def multi_turn(client) -> list:
    first = await send(client, message("ask"))
    steps = [first]
    if "error" in first:
        return steps
    second = await send(client, message("blue", first["task_id"], first["context_id"]))
    steps.append(second)
    steps.append(await send(client, message("round", first["task_id"], first["context_id"])))
    got = await client.get_task(GetTaskRequest(id=first["task_id"], history_length=10))
    steps.append(
        {
            "state": TaskState.Name(got.status.state),
            "history": [text_of(m.parts) for m in got.history if m.role == Role.ROLE_USER],
        }
    )
    return steps


async def cancel(client) -> list:
    started = await send(
        client,
        message("wait"),
        return_immediately=True,
        stop_after=lambda kinds, state: "task" in kinds,
    )
    steps = [started]
    if "error" in started:
        return steps
    canceled = await client.cancel_task(CancelTaskRequest(id=started["task_id"]))
    steps.append({"state": TaskState.Name(canceled.status.state)})
    try:
        again = await client.cancel_task(CancelTaskRequest(id=started["task_id"]))
        steps.append({"state": TaskState.Name(again.status.state)})
    except Exception as err:
        steps.append({"error": f"{type(err).__name__}: {err}"})
    return steps


async def run_case(card: AgentCard, case: dict) -> dict:
    streaming = case["scenario"] == "stream-follow-up"
    config = ClientConfig(streaming=streaming, supported_protocol_bindings=[case["binding"]])
    client = ClientFactory(config).create(only_v1(card))
    try:
        if case["scenario"] == "cancel":
            steps = await cancel(client)
        else:
            # A streaming client sends the follow-ups as streams too (SendStreamingMessage).
            steps = await multi_turn(client)
    except Exception as err:
        steps = [{"error": f"{type(err).__name__}: {err}"}]
    finally:
        await client.close()
    return {"transport": type(client._transport).__name__, "steps": steps}


async def main() -> None:
    base_url, cases = sys.argv[1], json.loads(sys.argv[2])
    async with httpx.AsyncClient(timeout=30) as http:
        card = await A2ACardResolver(http, base_url).get_agent_card()
    results = [await run_case(card, case) for case in cases]
    print(json.dumps(results))


asyncio.run(main())
