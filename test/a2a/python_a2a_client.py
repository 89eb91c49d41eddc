"""The official Python A2A client (pip a2a-sdk) against an AMF agent, used by pythonA2aClient.test.ts.

Usage: python3 python_a2a_client.py BASE_URL CASES_JSON
CASES_JSON is a list of {"binding": "JSONRPC"|"HTTP+JSON", "version": "1.0"|"0.3", "stream": bool,
"text": str, "tag": str|null}. For version 0.3 the card is narrowed to its 0.3 interfaces, so the
SDK's own compatibility transport speaks the 0.3 wire (message/send, kind-tagged parts).
Prints one JSON list: per case the transport used, the kinds of events received, and the final
task state and answer text (or the error).
"""

import asyncio
import json
import sys
import uuid

import httpx
from a2a.client import ClientConfig, ClientFactory
from a2a.client.card_resolver import A2ACardResolver
from a2a.types.a2a_pb2 import AgentCard, Message, Part, Role, SendMessageRequest, TaskState


def narrow(card: AgentCard, version: str) -> AgentCard:
    """A copy of the card with only the interfaces of one protocol version."""
    copy = AgentCard()
    copy.CopyFrom(card)
    del copy.supported_interfaces[:]
    copy.supported_interfaces.extend(i for i in card.supported_interfaces if i.protocol_version == version)
    return copy


def text_of(parts) -> str:
    return "".join(p.text for p in parts if p.HasField("text"))


async def run_case(card: AgentCard, case: dict) -> dict:
    config = ClientConfig(streaming=case["stream"], supported_protocol_bindings=[case["binding"]])
    client = ClientFactory(config).create(narrow(card, case["version"]))
    message = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=case["text"])])
    if case.get("tag"):
        message.metadata.update({"tag": case["tag"]})
    kinds, state, answer, task_id = [], None, "", None
    try:
        async for event in client.send_message(SendMessageRequest(message=message)):
            kind = event.WhichOneof("payload")
            kinds.append(kind)
            if kind == "message":
                answer, state = text_of(event.message.parts), "TASK_STATE_COMPLETED"
            elif kind == "task":
                task_id, state = event.task.id, TaskState.Name(event.task.status.state)
                artifacts = "".join(text_of(a.parts) for a in event.task.artifacts)
                answer = artifacts or answer
            elif kind == "status_update":
                state = TaskState.Name(event.status_update.status.state)
            elif kind == "artifact_update":
                chunk = text_of(event.artifact_update.artifact.parts)
                answer = answer + chunk if event.artifact_update.append else chunk
        result = {"ok": True, "kinds": kinds, "state": state, "text": answer, "task_id": task_id}
    except Exception as err:  # reported to the test, which asserts on it
        result = {"ok": False, "error": f"{type(err).__name__}: {err}"}
    finally:
        await client.close()
    result["transport"] = type(client._transport).__name__
    return result


async def main() -> None:
    base_url, cases = sys.argv[1], json.loads(sys.argv[2])
    async with httpx.AsyncClient(timeout=30) as http:
        card = await A2ACardResolver(http, base_url).get_agent_card()
    results = [await run_case(card, case) for case in cases]
    print(json.dumps(results))


asyncio.run(main())
