"""One error shape for every failure: RFC 9457 ``application/problem+json``."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from http import HTTPStatus
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.dependencies.models import Dependant
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute, iter_route_contexts
from pydantic import BaseModel
from sqlalchemy.exc import DataError, IntegrityError
from starlette.exceptions import HTTPException as StarletteHTTPException

from tessera_api.frontend import dashboard_file

PROBLEM_MEDIA_TYPE = "application/problem+json"

log = logging.getLogger(__name__)

Loc = Sequence[str | int]


class FieldError(BaseModel):
    """Where a validation error is and what is wrong there."""

    loc: list[str | int]
    msg: str


class Problem(BaseModel):
    """An RFC 9457 problem document with a stable machine-readable ``code``."""

    type: str
    title: str
    status: int
    detail: str
    code: str
    errors: list[FieldError] | None = None


class ApiError(Exception):
    """A failure the client can act on, rendered as a problem document."""

    def __init__(
        self, status: int, code: str, detail: str, errors: list[FieldError] | None = None
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.code = code
        self.detail = detail
        self.errors = errors


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` declaring that a route answers these statuses with a problem.

    A route declares what its own handler raises (``responses=problem_responses(404, 409)``);
    what its dependencies raise and what its parameters and body can fail with are added by
    ``declare_problems``.
    """
    schema = {"$ref": "#/components/schemas/Problem"}
    return {
        status: {
            "description": HTTPStatus(status).phrase,
            "content": {PROBLEM_MEDIA_TYPE: {"schema": schema}},
        }
        for status in statuses
    }


def _dependencies(dependant: Dependant) -> Iterator[Dependant]:
    for sub in dependant.dependencies:
        yield sub
        yield from _dependencies(sub)


DependencyProblems = Mapping[Callable[..., Any], Sequence[int]]
"""The problem statuses each dependency answers (``authenticate``: 401, 403)."""


def route_problems(route: APIRoute, dependencies: DependencyProblems) -> set[int]:
    """The problem statuses a route can answer besides those its handler declares: those of the
    dependencies it uses; 422 when a parameter or the body can fail validation; 400 (a body that
    is not JSON) and 413 (a body over the size limit) when it takes a body."""
    found: set[int] = set()
    parts = [route.dependant, *_dependencies(route.dependant)]
    for part in parts:
        if part.call is not None:
            found.update(dependencies.get(part.call, ()))
        if part.path_params or part.query_params or part.header_params or part.cookie_params:
            found.add(422)
    if route.body_field is not None:
        found.update((400, 413, 422))
    return found


def declare_problems(router: APIRouter, dependencies: DependencyProblems) -> None:
    """Declare on each route of ``router`` the problem documents it can answer (before the
    router is included anywhere)."""
    for route in router.routes:
        if isinstance(route, APIRoute):
            declared = problem_responses(*sorted(route_problems(route, dependencies)))
            merged = {**declared, **route.responses}
            route.responses = dict(sorted(merged.items(), key=lambda item: str(item[0])))


def complete_openapi(app: FastAPI) -> None:
    """Finish the app's OpenAPI document: the ``Problem`` schema the routes refer to, and
    parameters that are optional by being left out, not by a ``null`` no query string or header
    can carry."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        document = generate()
        schemas = document.setdefault("components", {}).setdefault("schemas", {})
        problem = Problem.model_json_schema(ref_template="#/components/schemas/{model}")
        schemas.update(problem.pop("$defs", {}))
        schemas["Problem"] = problem
        for item in document.get("paths", {}).values():
            for operation in item.values():
                for parameter in operation.get("parameters", []):
                    parameter["schema"] = _without_null(parameter.get("schema", {}))
        return document

    app.openapi = openapi  # type: ignore[method-assign]


def _without_null(schema: dict[str, Any]) -> dict[str, Any]:
    """``{"anyOf": [X, {"type": "null"}], …}`` as ``X`` with the rest of ``…``."""
    options = schema.get("anyOf")
    if not isinstance(options, list):
        return schema
    kept = [o for o in options if o != {"type": "null"}]
    if len(kept) != 1 or len(kept) == len(options):
        return schema
    rest = {k: v for k, v in schema.items() if k != "anyOf"}
    return {**kept[0], **rest}


def not_found(what: str, key: str) -> ApiError:
    return ApiError(404, "not_found", f"{what} {key!r} does not exist")


def forbidden(detail: str) -> ApiError:
    return ApiError(403, "forbidden", detail)


def conflict(code: str, detail: str) -> ApiError:
    return ApiError(409, code, detail)


def invalid(code: str, detail: str, loc: Loc = ()) -> ApiError:
    return ApiError(422, code, detail, [FieldError(loc=list(loc), msg=detail)])


def field_errors(raw: Sequence[Any], prefix: Loc = ()) -> list[FieldError]:
    """Pydantic's error list reduced to JSON-safe ``{loc, msg}`` pairs."""
    return [
        FieldError(
            loc=[*prefix, *(p for p in e.get("loc", ()) if isinstance(p, str | int))],
            msg=str(e.get("msg", "invalid")),
        )
        for e in raw
    ]


def problem_response(
    status: int,
    code: str,
    detail: str,
    errors: list[FieldError] | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    title = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else "Error"
    body = Problem(
        type=f"urn:tessera:problem:{code}",
        title=title,
        status=status,
        detail=detail,
        code=code,
        errors=errors,
    )
    return JSONResponse(
        body.model_dump(exclude_none=True),
        status_code=status,
        media_type=PROBLEM_MEDIA_TYPE,
        headers=headers,
    )


_HTTP_CODES = {
    400: "bad_request",
    401: "unauthenticated",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "validation_error",
}


def install_error_handlers(app: FastAPI) -> None:
    """Render every error, FastAPI's own included, as a problem document."""

    @app.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        return problem_response(exc.status, exc.code, exc.detail, exc.errors, headers)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = field_errors(exc.errors())
        return problem_response(422, "validation_error", "the request is invalid", errors)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code == 404 and (page := dashboard_file(request)) is not None:
            return page
        if exc.status_code == 400 and isinstance(exc.__cause__, RecursionError):
            # the JSON parser gave up on a body nested deeper than its stack: no field in it can
            # be within the bound on nesting
            detail = "the request body is nested too deeply to be read"
            errors = [FieldError(loc=["body"], msg=detail)]
            return problem_response(422, "validation_error", detail, errors)
        headers = exc.headers
        if exc.status_code == 405:
            headers = {**(headers or {}), "Allow": _allowed_methods(request)}
        code = _HTTP_CODES.get(exc.status_code, "http_error")
        return problem_response(exc.status_code, code, str(exc.detail), None, headers)

    @app.exception_handler(IntegrityError)
    async def _integrity(_: Request, exc: IntegrityError) -> JSONResponse:
        return problem_response(409, "conflict", "the change conflicts with stored data")

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error", exc_info=exc)
        return problem_response(500, "internal_error", "an unexpected error occurred")

    @app.exception_handler(DataError)
    async def _data(_: Request, exc: DataError) -> JSONResponse:
        return problem_response(422, "invalid_data", "a value cannot be stored")


def _allowed_methods(request: Request) -> str:
    """Every method of every route at the request's path (the router names only the first)."""
    path = request.scope["path"]
    root = request.scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root) :]
    methods: set[str] = set()
    for route in iter_route_contexts(request.app.routes):
        regex = getattr(route, "path_regex", None)
        if route.methods and regex is not None and regex.match(path):
            methods |= route.methods
    return ", ".join(sorted(methods))
