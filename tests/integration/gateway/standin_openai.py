"""A stand-in OpenAI-compatible model server (what vLLM answers), run as its own process.

``python standin_openai.py <name> <port>`` serves ``/v1/chat/completions`` (streamed or
not), ``/v1/completions``, ``/v1/embeddings``, ``/v1/rerank`` and ``/v1/audio/transcriptions`` on
127.0.0.1 and prints ``ready`` once it listens. Every answer says who answered and what it
was sent (``<name>|<model>|<traceparent>``), so tests see where the gateway routed. A
streamed answer pauses ``PAUSE_SECONDS`` between its two chunks, so a test can tell a
gateway that buffers from one that does not. A completion of the prompt ``hang up`` is read
and never answered (the connection closes); one of ``hold <seconds>`` is answered after that
long (a request that keeps the server busy, as a long generation would); one of ``headers``
is answered with the request headers the server received (as JSON pairs, in ``text``) and
tries to set a cookie; one of ``body`` is answered with the body the server received, as
it came (in ``text``).
"""

from __future__ import annotations

import asyncio
import json
import sys

from aiohttp import web

PAUSE_SECONDS = 0.4
CREATED = 1767225600


def who(request: web.Request, model: object) -> str:
    return f"{request.app['name']}|{model}|{request.headers.get('traceparent', '')}"


async def chat(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    text = who(request, body.get("model"))
    if not body.get("stream"):
        return web.json_response(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": CREATED,
                "model": body.get("model"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                    }
                ],
            }
        )
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    for number, piece in enumerate((text, "|done")):
        if number:
            await asyncio.sleep(PAUSE_SECONDS)
        chunk = {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": body.get("model"),
            "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}],
        }
        await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


async def completions(request: web.Request) -> web.Response:
    body = await request.json()
    if body.get("prompt") == "hang up" and request.transport is not None:
        request.transport.close()  # read the request, answer nothing
        return web.Response()
    prompt = body.get("prompt")
    if isinstance(prompt, str) and prompt.startswith("hold "):
        await asyncio.sleep(float(prompt.removeprefix("hold ")))
    if prompt == "body":  # what reached the server, byte for byte
        return web.json_response(
            {"id": "cmpl-1", "object": "text_completion", "created": CREATED,
             "model": body.get("model"),
             "choices": [{"index": 0, "text": (await request.read()).decode(),
                          "finish_reason": "stop", "logprobs": None}]},
        )  # fmt: skip
    if prompt == "headers":  # what reached the server, and a cookie it tries to set
        received = json.dumps([[name.lower(), value] for name, value in request.headers.items()])
        return web.json_response(
            {"id": "cmpl-1", "object": "text_completion", "created": CREATED,
             "model": body.get("model"),
             "choices": [{"index": 0, "text": received, "finish_reason": "stop",
                          "logprobs": None}]},
            headers={"Set-Cookie": "session=from-the-model; Path=/", "X-Served-By": "standin"},
        )  # fmt: skip
    return web.json_response(
        {
            "id": "cmpl-1",
            "object": "text_completion",
            "created": CREATED,
            "model": body.get("model"),
            "choices": [
                {
                    "index": 0,
                    "text": who(request, body.get("model")),
                    "finish_reason": "stop",
                    "logprobs": None,
                }
            ],
        }
    )


async def embeddings(request: web.Request) -> web.Response:
    body = await request.json()
    return web.json_response(
        {
            "object": "list",
            "model": who(request, body.get("model")),
            "data": [{"object": "embedding", "index": 0, "embedding": [0.25, 0.5]}],
            "usage": {"prompt_tokens": 1, "total_tokens": 1},
        }
    )


async def rerank(request: web.Request) -> web.Response:
    """As Infinity and vLLM answer a rerank: each document's relevance, the best first."""
    body = await request.json()
    documents = body.get("documents") or []
    return web.json_response(
        {
            "model": who(request, body.get("model")),
            "results": [
                {"index": index, "relevance_score": 1.0 / (index + 1)}
                for index in range(len(documents))
            ],
        }
    )


async def transcriptions(request: web.Request) -> web.Response:
    form = await request.post()
    upload = form.get("file")
    size = len(upload.file.read()) if isinstance(upload, web.FileField) else -1
    name = upload.filename if isinstance(upload, web.FileField) else None
    return web.json_response(
        {"text": f"{who(request, form.get('model'))}|{name}|{size}|{form.get('language')}"}
    )


async def main(name: str, port: int) -> None:
    app = web.Application(client_max_size=64 * 1024 * 1024)  # the gateway sets the limits
    app["name"] = name
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_post("/v1/completions", completions)
    app.router.add_post("/v1/embeddings", embeddings)
    app.router.add_post("/v1/rerank", rerank)
    app.router.add_post("/v1/audio/transcriptions", transcriptions)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    print("ready", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
