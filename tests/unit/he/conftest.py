"""Small Paillier keys for the unit lane (512 bits through the explicit test-only flag: milliseconds)."""

from __future__ import annotations

import pytest

from vfl.he import PrivateKey, PublicKey, generate_keypair


@pytest.fixture(scope="session")
def keys() -> tuple[PublicKey, PrivateKey]:
    return generate_keypair(512, test_only_small_key=True)


@pytest.fixture(scope="session")
def pk(keys: tuple[PublicKey, PrivateKey]) -> PublicKey:
    return keys[0]


@pytest.fixture(scope="session")
def sk(keys: tuple[PublicKey, PrivateKey]) -> PrivateKey:
    return keys[1]
