"""Algorithms: their roles and configuration schemas, read without importing torch."""

from __future__ import annotations

from fastapi import APIRouter

from tessera_api.deps import Principal, SpecsDep
from tessera_api.errors import not_found, problem_responses
from tessera_api.routes.paging import Key
from tessera_api.schemas import AlgorithmPublic

router = APIRouter(prefix="/algorithms", tags=["algorithms"])


@router.get("")
def list_algorithms(_: Principal, specs: SpecsDep) -> list[AlgorithmPublic]:
    """List every algorithm with its roles and configuration schema."""
    return [AlgorithmPublic.model_validate(specs[n].describe()) for n in sorted(specs)]


@router.get("/{name}", responses=problem_responses(404))
def get_algorithm(name: Key, _: Principal, specs: SpecsDep) -> AlgorithmPublic:
    """Get one algorithm with its roles and configuration schema."""
    spec = specs.get(name)
    if spec is None:
        raise not_found("algorithm", name)
    return AlgorithmPublic.model_validate(spec.describe())
