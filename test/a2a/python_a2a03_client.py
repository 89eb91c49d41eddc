"""A client of the A2A 0.3 line (pip a2a-sdk 0.3.x, in its own venv) against an AMF agent, used by
a2a03Client.test.ts: discovery from /.well-known/agent-card.json, send, stream, get, cancel and
resubscribe, over one binding, as a plain client sends them (no AMF metadata).

Usage: python3 python_a2a03_client.py BASE_URL BINDING   (BINDING: JSONRPC | HTTP+JSON)
Prints one JSON object: the card as the 0.3 client read it, then one entry per operation.
"""

import asyncio
import json
import sys
import uuid

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import (
    Message,
    Part,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskIdParams,
    TaskQueryParams,
    TaskStatusUpdateEvent,
    TextPart,
)


def message(text: str, task_id: str | None = None, context_id: str | None = None) -> Message:
    return Message(
        message_id=str(uuid.uuid4()),
        role=Role.user,
        parts=[Part(root=TextPart(text=text))],
        task_id=task_id,
        context_id=context_id,
    )


def text_of(parts) -> str:
    return "".join(p.root.text for p in parts or [] if isinstance(p.root, TextPart))


def describe(item) -> str:
    """The 0.3 kind of a stream item: a Message, or (task, update) with the update's kind."""
    if isinstance(item, Message):
        return "message"
    _task, update = item
    if update is None:
        return "task"
    if isinstance(update, TaskStatusUpdateEvent):
        return f"status-update:{update.status.state.value}"
    if isinstance(update, TaskArtifactUpdateEvent):
        return "artifact-update"
    return type(update).__name__


async def send(client, msg: Message, stop_at_task: bool = False) -> dict:
    kinds, task = [], None
    async for item in client.send_message(msg):
        kinds.append(describe(item))
        if not isinstance(item, Message):
            task = item[0]
        if stop_at_task and task is not None:
            break
    out = {"kinds": kinds}
    if isinstance(task, Task):
        out.update(
            task_id=task.id,
            context_id=task.context_id,
            state=task.status.state.value,
            prompt=text_of(task.status.message.parts) if task.status.message else "",
            text="".join(text_of(a.parts) for a in task.artifacts or []),
        )
    return out


async def step(results: dict, name: str, work) -> dict:
    try:
        results[name] = await work
    except Exception as err:  # reported to the test, which asserts on it
        results[name] = {"error": f"{type(err).__name__}: {err}"}
    return results[name]


async def main() -> None:
    base_url, binding = sys.argv[1], sys.argv[2]
    results: dict = {}
    async with httpx.AsyncClient(timeout=30) as http:
        # Discovery as a 0.3 client does it: /.well-known/agent-card.json, parsed by the 0.3 model.
        card = await A2ACardResolver(http, base_url).get_agent_card()
        results["card"] = {
            "url": card.url,
            "preferred_transport": card.preferred_transport,
            "protocol_version": card.protocol_version,
            "additional_interfaces": [
                {"url": i.url, "transport": i.transport} for i in card.additional_interfaces or []
            ],
            "skills": [s.id for s in card.skills],
        }
        streaming = ClientFactory(
            ClientConfig(httpx_client=http, streaming=True, supported_transports=[binding])
        ).create(card)
        blocking = ClientFactory(
            ClientConfig(httpx_client=http, streaming=False, supported_transports=[binding])
        ).create(card)
        polling = ClientFactory(
            ClientConfig(httpx_client=http, streaming=False, polling=True, supported_transports=[binding])
        ).create(card)
        results["transport"] = type(streaming._transport).__name__

        sent = await step(results, "send", send(blocking, message("hello from 0.3")))
        await step(results, "stream", send(streaming, message("stream from 0.3")))
        if "task_id" in sent:
            got = await step(
                results, "get", blocking.get_task(TaskQueryParams(id=sent["task_id"], history_length=5))
            )
            if isinstance(got, Task):
                results["get"] = {
                    "state": got.status.state.value,
                    "text": "".join(text_of(a.parts) for a in got.artifacts or []),
                }

        # Multi-turn over streams: each answer stream of a follow-up begins with the task.
        first = await step(results, "ask", send(streaming, message("ask")))
        if "task_id" in first:
            await step(
                results,
                "answer",
                send(streaming, message("blue", first["task_id"], first["context_id"])),
            )

        waiting = await step(results, "wait", send(polling, message("wait")))
        if "task_id" in waiting:
            canceled = await step(results, "cancel", blocking.cancel_task(TaskIdParams(id=waiting["task_id"])))
            if isinstance(canceled, Task):
                results["cancel"] = {"state": canceled.status.state.value}

        slow = await step(results, "slow", send(polling, message("slow")))
        if "task_id" in slow:

            async def follow():
                kinds, text = [], ""
                async for task, update in streaming.resubscribe(TaskIdParams(id=slow["task_id"])):
                    kinds.append("task" if update is None else describe((task, update)))
                    text = "".join(text_of(a.parts) for a in task.artifacts or [])
                return {"kinds": kinds, "state": task.status.state.value, "text": text}

            await step(results, "resubscribe", follow())
        for client in (streaming, blocking, polling):
            await client.close()
    print(json.dumps(results))


asyncio.run(main())
