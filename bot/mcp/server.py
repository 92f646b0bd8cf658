"""`codebot mcp`: the agent's tools, and the whole agent as `ask`, over the Model Context Protocol.

Over stdio (an editor starts `codebot mcp` itself) or streamable HTTP (`--http`, a shared
server; every request must carry `Authorization: Bearer $CODEBOT_MCP_TOKEN`). Each tool call
leases the current snapshots of the repos in scope for that call only and gets a fresh tool
context, so it runs exactly the code the chat agent runs: the same whitelist, path checks,
caps and redaction. Calls run in worker threads; stdout belongs to the protocol, so nothing
but the protocol is ever printed there (logs go to stderr).
"""

from __future__ import annotations

import hmac
import itertools
import logging
import threading
import uuid
from collections.abc import Callable
from typing import Any

import anyio
import anyio.to_thread
import mcp.types as types
from mcp import MCPError
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings

from config.errors import ConfigError
from worker.agent.citations import check_answer
from worker.agent.loop import Agent, ModelFailure
from worker.conversation.context import storable_paste
from worker.jobs.console import MISSING_MODEL_MESSAGE
from worker.jobs.outcomes import cut_off_markdown, cut_off_text, not_an_answer_text, stopped_markdown
from worker.jobs.question import Question, ReplyTarget, event_identity, reference_id
from worker.jobs.question_context import read_question_context
from worker.jobs.question_start import make_model_client
from worker.jobs.read_footer import with_footer
from worker.jobs.runtime import Runtime
from worker.jobs.scope import redact_and_extract_repos
from worker.repos.secrets.redaction import get_redactor
from worker.tools import make_context
from worker.tools.context import unknown_repo_message

log = logging.getLogger("codebot.mcp")

Progress = Callable[[str], None]
MIN_TOKEN_CHARS = 16
ASK_DESCRIPTION = (
    "Ask codebot a question about the code and get a concise answer whose every citation was "
    "checked against the lines it read and links to the exact commit. codebot searches and reads "
    "the repos itself with its own model (several steps: seconds to a minute). For a single "
    "lookup, the other tools are faster."
)
ASK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "question": {"type": "string", "description": "the question, e.g. 'How are retries backed off?'"},
        "repo": {"type": "string", "description": "a repo's name to limit the question to; omit for all"},
        "context": {
            "type": "string",
            "description": "a log, stack trace or other text the question is about, pasted as is "
            "(like `codebot ask --context FILE`): secrets are redacted and its end kept within "
            "CODEBOT_THREAD_CONTEXT_CHARS before the model sees it",
        },
    },
    "required": ["question"],
    "additionalProperties": False,
}


def mcp_scope(runtime: Runtime, http: bool) -> list[str]:
    """The repos MCP clients may read: `mcp_repos`, else all (stdio) or the unrestricted ones (HTTP)."""
    whitelist = runtime.whitelist
    named = list(runtime.settings.mcp_repos)
    for name in named:
        if whitelist.get(name) is None:
            raise ConfigError(
                f"CODEBOT_MCP_REPOS: {unknown_repo_message(name, whitelist.names())} "
                f"(the whitelist is {whitelist.path})"
            )
    if named:
        return named
    return [r.name for r in whitelist.repos if not http or r.channels is None]


def _text_result(text: str, error: bool = False, data: dict[str, Any] | None = None) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(text=text)], is_error=error, structured_content=data or None
    )


class CodebotTools:
    """The registry's tools plus `ask`, over the snapshots of `repos`; every method is blocking."""

    def __init__(self, runtime: Runtime, repos: list[str]) -> None:
        self.runtime = runtime
        self.repos = repos

    def tools(self) -> list[types.Tool]:
        read_only = types.ToolAnnotations(read_only_hint=True, open_world_hint=False, idempotent_hint=True)
        listed = [
            types.Tool(
                name=t.name, description=t.description, input_schema=t.parameters, annotations=read_only
            )
            for t in self.runtime.registry.tools.values()
        ]
        ask = types.ToolAnnotations(read_only_hint=True, open_world_hint=False, idempotent_hint=False)
        return [
            *listed,
            types.Tool(name="ask", description=ASK_DESCRIPTION, input_schema=ASK_SCHEMA, annotations=ask),
        ]

    def instructions(self) -> str:
        described = [
            f"- {spec.name}: {spec.description or 'no description'}"
            for spec in self.runtime.whitelist.repos
            if spec.name in self.repos
        ]
        return "\n".join(
            [
                "codebot gives read-only access to the code of these repositories:",
                *described,
                "Find code with search (ripgrep regex), find_definition and find_references; read it with "
                "read_file. Cite what you read as [repo:path#L12-L30]. For history, log, blame, show and "
                "diff read the repo's commits (cite one as [repo@sha]). `ask` returns a complete answer "
                "with verified, commit-pinned links.",
            ]
        )

    def call(self, name: str, arguments: dict[str, Any], progress: Progress) -> types.CallToolResult:
        if name == "ask":
            return self.ask(arguments, progress)
        runtime = self.runtime
        with runtime.mirrors.lease(self.repos) as snapshots:
            ctx = make_context(runtime.settings, snapshots, keep_data=False)  # the client gets the text
            outcome = runtime.registry.call(ctx, name, arguments)
            unsynced = [n for n in self.repos if n not in snapshots]
        # The arguments' names only: their values are a client's text (a pattern, a path, a secret).
        log.info("mcp tool=%s ok=%s args=%s", name, outcome.ok, ",".join(sorted(outcome.arguments)) or "-")
        text = outcome.text
        if not outcome.ok and unsynced:
            text += f" (not synced on this machine yet: {', '.join(unsynced)}; run `codebot repos sync`)"
        return _text_result(text, error=not outcome.ok)

    def ask(self, arguments: dict[str, Any], progress: Progress) -> types.CallToolResult:
        raw = arguments.get("question")
        if not isinstance(raw, str) or not raw.strip():
            return _text_result("Error: give a question, e.g. 'Where are retries configured?'", error=True)
        text, requested = redact_and_extract_repos(raw)
        repo = arguments.get("repo")
        if isinstance(repo, str) and repo.strip():
            requested.append(repo.strip().lower())
        for name in requested:
            if name not in self.repos:
                return _text_result(f"Error: {unknown_repo_message(name, self.repos)}", error=True)
        pasted = arguments.get("context")
        if pasted is not None and not isinstance(pasted, str):
            return _text_result("Error: `context` is the text of a log or trace, as a string", error=True)
        settings = self.runtime.settings
        if not settings.openai_api_key and not settings.openai_base_url:
            return _text_result("Error: " + MISSING_MODEL_MESSAGE.format(model=settings.model), error=True)
        question = Question(
            id=event_identity("mcp", uuid.uuid4().hex),
            asker="mcp",
            target=ReplyTarget(platform="console", channel="mcp"),
            text=text or raw,
            repos=requested or self.repos,
            # as `codebot ask --context`: redacted and within the budget before anything keeps it
            pasted=storable_paste(pasted or "", settings, get_redactor().redact),
        )
        return self._run_agent(question, progress)

    def _run_agent(self, question: Question, progress: Progress) -> types.CallToolResult:
        runtime = self.runtime
        with runtime.mirrors.lease(question.repos) as snapshots:
            if not snapshots:
                return _text_result(
                    "Error: none of these repos has been synced on this machine yet; run `codebot repos sync`",
                    error=True,
                )
            ctx = make_context(runtime.settings, snapshots, keep_data=False, question=question.text)
            agent = Agent(
                runtime.settings, make_model_client(runtime), runtime.registry, ctx, progress=progress
            )
            context = read_question_context(runtime, question, ctx.redact)  # the pasted log
            try:
                result = agent.run(question.model_copy(update={"text": context.before(question.text)}))
            except ModelFailure as exc:
                log.warning("mcp ask failed kind=%s: %s (server said: %s)", exc.kind, exc, exc.detail or "-")
                return _text_result(f"Error: codebot could not answer: {exc}", error=True)
            if result.failure is not None:
                log.warning("mcp ask: the model failed midway, server said: %s", result.failure.detail or "-")
            if result.outcome == "not_an_answer":  # no code was read: never passed on as an answer
                log.warning("mcp ask: not an answer, no code read (tool calls=%s)", result.tool_calls)
                return _text_result(not_an_answer_text(result, reference_id(question.id)), error=True)
            cut = result.outcome == "cut_off"
            shown = cut_off_text(result.text) if cut and not result.stopped else result.text
            checked = with_footer(ctx, check_answer(ctx, ctx.redact(shown)), {})  # what it read, how old
            commits = {name: snapshot.sha for name, snapshot in snapshots.items()}
        log.info(
            "mcp ask answered hops=%s tools=%s verified=%s unverified=%s",
            result.hops,
            result.tool_calls,
            len(checked.sources),
            checked.unverified,
        )
        data = {
            "sources": [vars(source) for source in checked.sources],
            "unverified": checked.unverified,
            "partial": result.partial,
            "cut_off": cut,
            "commits": commits,
        }
        ref = reference_id(question.id)
        markdown = cut_off_markdown(checked.markdown, ref) if cut else checked.markdown
        if result.stopped:  # stopped before the model wrote an answer: the note names the limit
            s = self.runtime.settings
            markdown = stopped_markdown(
                checked.markdown, result.stopped, ref, s.question_deadline_seconds, s.max_hops, result.advice
            )
        return _text_result(markdown, data=data)


def build_server(tools: CodebotTools) -> Server[Any]:
    """The MCP server: tools/list and tools/call, each call in a worker thread."""

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools.tools())

    known = {tool.name for tool in tools.tools()}

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name not in known:  # a protocol error, as the MCP spec has it, not a tool result
            raise MCPError(
                code=types.INVALID_PARAMS,
                message=f"Unknown tool: {params.name}; the tools are: {', '.join(sorted(known))}",
            )
        meta = ctx.meta or {}
        token = meta.get("progress_token", meta.get("progressToken"))
        steps = itertools.count(1)

        def progress(text: str) -> None:
            if token is not None:
                anyio.from_thread.run(ctx.session.send_progress_notification, token, next(steps), None, text)

        return await anyio.to_thread.run_sync(tools.call, params.name, params.arguments or {}, progress)

    return Server(
        "codebot",
        version="0.1.0",
        instructions=tools.instructions(),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def sync_missing_in_background(runtime: Runtime, repos: list[str]) -> threading.Thread:
    """Clone repos never synced on this machine, without holding up the server's start."""

    def run() -> None:
        for name in repos:
            if runtime.mirrors.current(name) is None:
                log.info("mcp: syncing %s (never synced on this machine)", name)
                result = runtime.mirrors.sync(name)
                if not result.ok:
                    log.warning("mcp: sync of %s failed: %s", name, result.error)

    thread = threading.Thread(target=run, name="mcp-sync", daemon=True)
    thread.start()
    return thread


def serve_stdio(runtime: Runtime) -> int:
    repos = mcp_scope(runtime, http=False)
    server = build_server(CodebotTools(runtime, repos))
    sync_missing_in_background(runtime, repos)

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)
    return 0


class BearerAuth:
    """ASGI middleware: every HTTP request must carry `Authorization: Bearer <token>` (the
    scheme in any case, as RFC 9110 has it: some proxies and clients send `bearer`)."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self.expected = token.encode()

    def _authorized(self, header: bytes) -> bool:
        scheme, _, credentials = header.strip().partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(credentials.strip(), self.expected)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            sent = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not self._authorized(sent):
                body = b'{"error": "unauthorized: send Authorization: Bearer <CODEBOT_MCP_TOKEN>"}'
                headers = [
                    (b"content-type", b"application/json"),
                    (b"www-authenticate", b'Bearer realm="codebot"'),
                    (b"content-length", str(len(body)).encode()),
                ]
                await send({"type": "http.response.start", "status": 401, "headers": headers})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


LOCAL_HOSTS = ("127.0.0.1", "localhost", "[::1]")


def transport_security(allowed: tuple[str, ...], bind_host: str) -> TransportSecuritySettings | None:
    """The MCP SDK's DNS-rebinding protection: the Host (and any Origin) header must name us.

    Without `mcp_allowed_hosts`, the SDK's default: local names only when bound to a local
    address (a reverse proxy's public name gets `421 Invalid Host header`), no check otherwise.
    With it, those hosts (any port) are allowed too; `["*"]` turns the check off (the bearer
    token is still required)."""
    if "*" in allowed:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    if not allowed:
        return None
    hosts = [*LOCAL_HOSTS, *(h.strip().lower() for h in allowed if h.strip())]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[pattern for h in hosts for pattern in (h, f"{h}:*")],
        allowed_origins=[
            f"{scheme}://{h}{port}" for h in hosts for scheme in ("http", "https") for port in ("", ":*")
        ],
    )


def serve_http(runtime: Runtime, host: str, port: int) -> int:
    import uvicorn

    secret = runtime.settings.mcp_token
    token = secret.get_secret_value() if secret else ""
    if not token:
        raise ConfigError(
            "CODEBOT_MCP_TOKEN: set a bearer token to serve MCP over HTTP (e.g. `openssl rand -hex 32`); "
            "clients send it as `Authorization: Bearer <token>`"
        )
    if len(token) < MIN_TOKEN_CHARS:
        raise ConfigError(
            f"CODEBOT_MCP_TOKEN: use at least {MIN_TOKEN_CHARS} characters (e.g. `openssl rand -hex 32`)"
        )
    repos = mcp_scope(runtime, http=True)
    server = build_server(CodebotTools(runtime, repos))
    security = transport_security(runtime.settings.mcp_allowed_hosts, host)
    app = BearerAuth(server.streamable_http_app(host=host, transport_security=security), token)
    sync_missing_in_background(runtime, repos)
    log.info("codebot mcp: %d repo(s) at http://%s:%d/mcp (bearer token required)", len(repos), host, port)
    uvicorn.run(app, host=host, port=port, log_level="warning")
    return 0
