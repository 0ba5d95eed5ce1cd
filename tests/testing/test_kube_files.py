from __future__ import annotations

import csv
import shutil
import subprocess
from pathlib import Path

import yaml

from muster.testing import skip_or_fail
from muster.testing.kube_files import KubeUser, make_pki, new_user, write_kubeconfig, write_token_file


def test_token_file_lists_users_with_their_groups(tmp_path: Path) -> None:
    admin = KubeUser("admin", "t-admin", ("system:masters", "ops"))
    muster = KubeUser("muster", "t-muster")

    path = write_token_file(tmp_path / "tokens.csv", [admin, muster])

    rows = list(csv.reader(path.read_text().splitlines()))
    assert rows == [["t-admin", "admin", "admin", "system:masters,ops"], ["t-muster", "muster", "muster"]]
    assert path.stat().st_mode & 0o077 == 0


def test_new_users_get_distinct_tokens() -> None:
    assert new_user("a").token != new_user("a").token


def test_kubeconfig_points_at_the_server_as_the_user(tmp_path: Path) -> None:
    user = KubeUser("muster", "secret-token")

    path = write_kubeconfig(tmp_path / "k.yaml", "https://127.0.0.1:6443", tmp_path / "ca.crt", user)

    config = yaml.safe_load(path.read_text())
    assert config["current-context"] == "muster"
    assert config["clusters"][0]["cluster"] == {
        "server": "https://127.0.0.1:6443",
        "certificate-authority": str(tmp_path / "ca.crt"),
    }
    assert config["users"][0]["user"] == {"token": "secret-token"}


def test_serving_certificate_is_signed_by_the_ca_for_loopback(tmp_path: Path) -> None:
    if shutil.which("openssl") is None:
        skip_or_fail("openssl is not installed")

    pki = make_pki(tmp_path, ["127.0.0.1"], ["localhost"])

    def openssl(*args: str) -> str:
        return subprocess.run(["openssl", *args], capture_output=True, text=True, check=True).stdout

    assert "OK" in openssl("verify", "-CAfile", str(pki.ca_cert), str(pki.serving_cert))
    text = openssl("x509", "-in", str(pki.serving_cert), "-noout", "-text")
    assert "IP Address:127.0.0.1" in text and "DNS:localhost" in text
    assert "EC PRIVATE KEY" in pki.service_account_key.read_text()
    assert "PUBLIC KEY" in pki.service_account_public_key.read_text()
