"""``rath-mcp token create|list|revoke``, ``rath-mcp audit``, ``serve --auth`` flags: output and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.conftest import one_error_line, rath_here


def test_token_create_prints_the_secret_last_once_and_list_never_shows_it(
    capsys: pytest.CaptureFixture[str], home: Path
) -> None:
    code, out, _ = rath_here(
        capsys, "token", "create", "--tenant", "acme", "--project", "web", "--grants", "run.read,run.create",
        "--name", "ci", "--ttl", "30d", "--home", str(home),
    )  # fmt: skip
    assert code == 0
    lines = out.strip().splitlines()
    secret = lines[-1]
    assert secret.startswith("rath.tok_") and len(secret.split(".")[2]) >= 43
    token_id = secret.split(".")[1]
    code, out, _ = rath_here(capsys, "token", "list", "--home", str(home))
    (listed,) = [json.loads(line) for line in out.strip().splitlines()]
    assert code == 0 and listed["token_id"] == token_id and listed["grants"] == ["run.read", "run.create"]
    assert listed["name"] == "ci" and listed["expires_at"] and listed["revoked_at"] is None
    assert secret.split(".")[2] not in out
    code, out, _ = rath_here(capsys, "token", "revoke", token_id, "--home", str(home))
    assert code == 0 and out.startswith(f"revoked {token_id} at ")
    code, out, _ = rath_here(capsys, "token", "list", "--home", str(home))
    assert json.loads(out)["revoked_at"] is not None


@pytest.mark.parametrize(
    ("argv", "code", "words"),
    [
        (["token", "create", "--tenant", "a", "--project", "p", "--grants", "run.nope"], 1, "unknown grant 'run.nope'"),
        (["token", "create", "--tenant", "a", "--project", "p", "--grants", "admin", "--ttl", "soon"], 1, "--ttl"),
        (["token", "create", "--tenant", "a b", "--project", "p", "--grants", "admin"], 1, "--tenant 'a b'"),
        (["token", "create", "--project", "p", "--grants", "admin"], 2, "--tenant"),
        (["token", "revoke", "tok_0190f3c2a1b4e5f60718293a"], 1, "no token tok_0190f3c2a1b4e5f60718293a"),
        (["token", "revoke", "nonsense"], 1, "is not a token id"),
        (["audit", "--limit", "0"], 2, "--limit"),
        (["serve", "--transport", "http", "--host", "0.0.0.0"], 2, "not a loopback address"),
        (["serve", "--transport", "http", "--auth", "oauth"], 2, "--auth oauth needs --issuer"),
        (["serve", "--auth", "token"], 2, "stdio is a trusted local pipe"),
        (["serve", "--transport", "http", "--issuer", "https://id.example"], 2, "--issuer is for --auth oauth"),
        (
            ["serve", "--transport", "http", "--auth", "oauth", "--issuer", "http://id.example"],
            1,
            "must use https",
        ),
    ],
)
def test_bad_token_audit_and_serve_flags_are_one_line_errors(
    capsys: pytest.CaptureFixture[str], home: Path, argv: list[str], code: int, words: str
) -> None:
    if argv[:2] == ["token", "revoke"]:  # a store to look in
        assert rath_here(capsys, "migrate", "--home", str(home))[0] == 0
    got, out, err = rath_here(capsys, *argv, "--home", str(home))
    assert got == code, err
    assert words in one_error_line(err)
    if argv[:2] == ["token", "create"]:
        assert "rath.tok_" not in out


def test_audit_prints_json_lines_oldest_first(capsys: pytest.CaptureFixture[str], home: Path) -> None:
    assert rath_here(capsys, "migrate", "--home", str(home))[0] == 0
    code, out, err = rath_here(capsys, "audit", "--home", str(home))
    assert code == 0 and out == ""
    code, _, err = rath_here(capsys, "audit", "--home", str(home / "nowhere"))
    assert code == 1 and "there is no store" in one_error_line(err)
