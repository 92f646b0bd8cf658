"""`codebot web`: the operators' read-only console, an ASGI app (Starlette) rendered on the server.

Pages: Questions (and one question's tool-call trace), Quality, Repos, System. No JavaScript,
no CDN: plots are inline SVG drawn by the templates from geometry computed here (plots.py), so
the console works offline. Every template is autoescaped (Jinja2 `autoescape=True`) and every
response forbids scripts, frames and foreign resources (Content-Security-Policy), so a hostile
question, reason, file name or model error shows as text.

Who asks is decided per request (`Console.viewer_of`, bot/web/auth.py): a Bearer token alone
when one is sent, then a trusted proxy's user header, then the session cookie (bot/web/sessions.py,
where failed logins are counted too). Every request's Host must be one of the console's own
(`allowed_hosts`), before anything else.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from jinja2 import Environment, FileSystemLoader
from redis import Redis
from redis.exceptions import RedisError
from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from bot.web import data, history_data, ops_data, quality_data, texts
from bot.web.auth import COOKIE, Gate, Viewer, allowed_hosts
from bot.web.plots import Series, line_plot, percentile
from bot.web.sessions import LoginThrottle, Sessions
from worker.jobs.question import reference_id
from worker.jobs.runtime import Runtime

TEMPLATES = Path(__file__).parent / "templates"
PLOT_DAYS = 14
MAX_LOGIN_BYTES = 4096
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
Handler = Callable[[Request, Viewer], Response]


def make_environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES), autoescape=True, trim_blocks=True, lstrip_blocks=True
    )
    env.globals["texts"] = texts
    env.filters["reference"] = reference_id  # a question's id as its asker was told it
    env.globals["nav"] = [
        ("questions", "Questions"),
        ("quality", "Quality"),
        ("repos", "Repos"),
        ("system", "System"),
    ]
    return env


def peer_of(request: Request) -> str:
    """The TCP peer's address (uvicorn runs without proxy headers: never X-Forwarded-For)."""
    return request.client.host if request.client else ""


class Console:
    def __init__(
        self,
        runtime: Runtime,
        redis: Redis,
        gate: Gate,
        clock: Callable[[], float] = time.time,
        history: Engine | None = None,
    ) -> None:
        self.runtime = runtime
        self.redis = redis
        self.history = history  # the history database; None: Questions and Repos read Redis
        self.gate = gate
        self.clock = clock
        self.sessions = Sessions(redis, runtime.settings)
        self.throttle = LoginThrottle(redis, runtime.settings, clock)
        self.env = make_environment()

    def render(self, name: str, status: int = 200, **context: Any) -> Response:
        body = self.env.get_template(name).render(**context)
        return Response(body, status, headers=HEADERS, media_type="text/html")

    def throttled(self, seconds: int) -> Response:
        headers = {**HEADERS, "Retry-After": str(seconds)}
        return PlainTextResponse(texts.throttled(seconds), 429, headers=headers)

    def guarded(self, handler: Handler) -> Callable[[Request], Response]:
        def endpoint(request: Request) -> Response:
            viewer: Viewer | None = None
            try:
                found = self.viewer_of(request)
                if isinstance(found, Response):
                    return found
                viewer = found
                return handler(request, viewer)
            except RedisError as exc:
                problem = texts.redis_trouble(type(exc).__name__)
                return self.render("error.html", 503, viewer=viewer, problem=problem)

        return endpoint

    def viewer_of(self, request: Request) -> Viewer | Response:
        """Who asks, or the answer that turns them away. A Bearer token, when given, decides
        alone (wrong: 401, whatever other headers say); then a trusted proxy's user header;
        then the session cookie."""
        peer = peer_of(request)
        bearer = request.headers.get("authorization", "")
        if bearer:
            wait = self.throttle.wait_seconds(peer)
            if wait:
                return self.throttled(wait)
            given = bearer[7:].strip() if bearer.lower().startswith("bearer ") else ""
            viewer = self.gate.by_token(given)
            if viewer is None:
                self.throttle.failed(peer)
                return PlainTextResponse(texts.UNAUTHORIZED, 401, headers=HEADERS)
            return viewer
        headers = {k.lower(): v for k, v in request.headers.items()}
        viewer = self.gate.proxied(headers, peer)
        if viewer is None:
            remembered = self.sessions.fingerprint_of(request.cookies.get(COOKIE, ""))
            viewer = self.gate.by_fingerprint(remembered or "")
        return viewer or RedirectResponse("/login", 303, headers=HEADERS)

    # --- pages ------------------------------------------------------------------------------------

    def questions(self, request: Request, viewer: Viewer) -> Response:
        params = request.query_params
        filters = data.Filters(
            params.get("outcome", ""),
            params.get("repo", ""),
            params.get("channel", ""),
            params.get("ref", "").strip(),
        )
        if self.history is not None:
            wanted = history_data.Range.of(params)
            try:
                view = history_data.history_questions_page(
                    self.history, self.redis, filters, wanted, viewer.sees_questions, self.clock()
                )
            except SQLAlchemyError as exc:
                problem = texts.history_trouble(type(exc).__name__)
                return self.render("error.html", 503, viewer=viewer, problem=problem)
            return self.render(
                "questions.html", viewer=viewer, page="questions", view=view, filters=filters, wanted=wanted
            )
        page = data.questions_page(self.redis, filters, viewer.sees_questions)
        return self.render("questions.html", viewer=viewer, page="questions", view=page, filters=filters)

    def question(self, request: Request, viewer: Viewer) -> Response:
        question_id = request.path_params["question_id"]
        record = data.find_question(self.redis, question_id)
        if record is None and self.history is not None:  # older than Redis's capped list
            record = history_data.history_question(self.history, question_id)
        if record is None:
            return self.render("error.html", 404, viewer=viewer, problem=texts.NO_SUCH_QUESTION)
        row = data.question_row(self.redis, record, viewer.sees_questions)
        votes = data.feedback.votes_of(self.redis, row.id)
        facts = data.trace_facts(record.get("trace") or [], set(self.runtime.registry.tools))
        return self.render(
            "question.html", viewer=viewer, page="questions", row=row, votes=votes, trace_facts=facts
        )

    def quality(self, request: Request, viewer: Viewer) -> Response:
        """Over the history database when it holds questions; else Redis's capped list, saying so."""
        notice = texts.NO_HISTORY
        if self.history is not None:
            try:
                if quality_data.has_questions(self.history):
                    count = quality_data.days_wanted(request.query_params)
                    view = quality_data.quality_view(self.history, count, self.clock())
                    return self.render(
                        "quality_history.html",
                        viewer=viewer,
                        page="quality",
                        view=view,
                        plots=quality_data.quality_plots(view),
                        reasons=data.down_votes(self.redis, viewer.sees_questions),
                    )
            except SQLAlchemyError as exc:
                problem = texts.history_trouble(type(exc).__name__)
                return self.render("error.html", 503, viewer=viewer, problem=problem)
            notice = texts.EMPTY_HISTORY
        return self.capped_quality(viewer, notice)

    def capped_quality(self, viewer: Viewer, notice: str) -> Response:
        """The Quality page from Redis's capped list of the latest questions, which it names."""
        kept, oldest = data.capped_span(self.redis)
        notice += texts.capped_list(kept, data.day_of(oldest) if kept else "-")
        days = data.last_days(PLOT_DAYS, self.clock())
        per_day = data.daily_quality(self.redis, days)
        rates = line_plot(
            "rates",
            "👍 helpful rate and answer rate",
            days,
            [
                Series(
                    "👍 helpful rate",
                    [d.up / (d.up + d.down) * 100 if d.up + d.down else None for d in per_day],
                    "s1",
                ),
                Series(
                    "answer rate",
                    [d.answered / d.questions * 100 if d.questions else None for d in per_day],
                    "s2",
                ),
            ],
            unit="%",
            top=100,
        )
        times = line_plot(
            "time-to-answer",
            "Time to answer",
            days,
            [
                Series("p50", [percentile(d.seconds, 0.5) for d in per_day], "s1"),
                Series("p95", [percentile(d.seconds, 0.95) for d in per_day], "s3"),
            ],
            unit=" s",
        )
        return self.render(
            "quality.html",
            viewer=viewer,
            page="quality",
            plots=[rates, times],
            days=per_day,
            reasons=data.down_votes(self.redis, viewer.sees_questions),
            gaps=data.coverage_gaps(self.redis, viewer.sees_questions),
            notice=notice,
        )

    def repos(self, request: Request, viewer: Viewer) -> Response:
        try:
            rows = ops_data.repo_rows(self.redis, self.runtime, self.history)
        except SQLAlchemyError as exc:
            problem = texts.history_trouble(type(exc).__name__)
            return self.render("error.html", 503, viewer=viewer, problem=problem)
        return self.render(
            "repos.html", viewer=viewer, page="repos", repos=rows, from_history=self.history is not None
        )

    def system(self, request: Request, viewer: Viewer) -> Response:
        days = data.last_days(PLOT_DAYS, self.clock())
        view = ops_data.system_view(self.redis, self.runtime, days)
        tokens = line_plot(
            "tokens",
            "Tokens per day",
            days,
            [Series("tokens", [float(u.tokens) for _, u in view.usage], "s1")],
            limit=float(view.budget) or None,
            limit_label="daily budget",
        )
        cost = line_plot(
            "cost",
            "Cost per day",
            days,
            [Series("cost", [u.cost_usd for _, u in view.usage], "s2")],
            unit=" $",
        )
        plots = [tokens, cost] if view.priced else [tokens]
        return self.render("system.html", viewer=viewer, page="system", view=view, plots=plots)

    # --- login ------------------------------------------------------------------------------------

    def login_form(self, request: Request) -> Response:
        return self.render("login.html", viewer=None, page="login", problem="")

    async def login(self, request: Request) -> Response:
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_LOGIN_BYTES:
                return PlainTextResponse(texts.TOO_LARGE, 413, headers=HEADERS)
        given = (parse_qs(body.decode("utf-8", "replace")).get("token") or [""])[0].strip()
        try:  # Redis is blocking I/O: off the event loop, as the pages are
            return await run_in_threadpool(self.logged_in, request, given)
        except RedisError as exc:
            return self.render(
                "error.html", 503, viewer=None, problem=texts.redis_trouble(type(exc).__name__)
            )

    def logged_in(self, request: Request, given: str) -> Response:
        peer = peer_of(request)
        wait = self.throttle.wait_seconds(peer)
        if wait:
            response = self.render(
                "login.html", 429, viewer=None, page="login", problem=texts.throttled(wait)
            )
            response.headers["Retry-After"] = str(wait)
            return response
        token_fingerprint = self.gate.fingerprint_for(given)
        if token_fingerprint is None:
            self.throttle.failed(peer)
            return self.render("login.html", 401, viewer=None, page="login", problem=texts.WRONG_TOKEN)
        response = RedirectResponse("/questions", 303, headers=HEADERS)
        secure = request.url.scheme == "https" or (
            self.gate.is_trusted_proxy(peer) and request.headers.get("x-forwarded-proto") == "https"
        )
        cookie = self.sessions.open(token_fingerprint)
        response.set_cookie(
            COOKIE, cookie, self.sessions.seconds, httponly=True, samesite="strict", secure=secure
        )
        return response

    def logout(self, request: Request) -> Response:
        try:
            self.sessions.close(request.cookies.get(COOKIE, ""))
        except RedisError as exc:  # the session was not ended: say so rather than pretend
            return self.render(
                "error.html", 503, viewer=None, problem=texts.redis_trouble(type(exc).__name__)
            )
        response = self.render("login.html", viewer=None, page="login", notice=texts.LOGGED_OUT)
        response.delete_cookie(COOKIE)
        return response

    def stylesheet(self, request: Request) -> Response:
        css = (TEMPLATES / "console.css").read_text(encoding="utf-8")
        return Response(css, headers={**HEADERS, "Cache-Control": "max-age=300"}, media_type="text/css")


def build_app(
    runtime: Runtime,
    redis: Redis,
    gate: Gate | None = None,
    listen_host: str = "127.0.0.1",
    clock: Callable[[], float] = time.time,
    history: Engine | None = None,
) -> Starlette:
    """The console's app. Every request's Host must be one of `allowed_hosts` (else 400, before
    anything else is read: a DNS-rebinding page never reaches the login or a Bearer check)."""
    console = Console(runtime, redis, gate or Gate(runtime.settings), clock, history)
    routes = [
        Route("/", lambda request: RedirectResponse("/questions", 303)),
        Route("/health", lambda request: PlainTextResponse("ok")),
        Route("/login", console.login_form, methods=["GET"]),
        Route("/login", console.login, methods=["POST"]),
        Route("/logout", console.logout, methods=["POST"]),
        Route("/static/console.css", console.stylesheet),
        Route("/questions", console.guarded(console.questions)),
        Route("/questions/{question_id}", console.guarded(console.question)),
        Route("/quality", console.guarded(console.quality)),
        Route("/repos", console.guarded(console.repos)),
        Route("/system", console.guarded(console.system)),
    ]
    hosts = allowed_hosts(runtime.settings, listen_host)
    middleware = [Middleware(TrustedHostMiddleware, allowed_hosts=hosts, www_redirect=False)]
    return Starlette(routes=routes, middleware=middleware)
