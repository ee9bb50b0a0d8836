"""One error shape for every failure: RFC 9457 ``application/problem+json``."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
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
    """OpenAPI ``responses`` declaring that a route answers these statuses with a problem."""
    schema = {"$ref": "#/components/schemas/Problem"}
    return {
        status: {
            "model": Problem,
            "description": HTTPStatus(status).phrase,
            "content": {PROBLEM_MEDIA_TYPE: {"schema": schema}},
        }
        for status in statuses
    }


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
        code = _HTTP_CODES.get(exc.status_code, "http_error")
        return problem_response(exc.status_code, code, str(exc.detail), None, exc.headers)

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
