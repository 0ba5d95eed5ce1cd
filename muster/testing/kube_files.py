"""Files a test Kubernetes control plane needs: certificates and keys, tokens, kubeconfigs.

Keys come from the ``openssl`` CLI because the ``cryptography`` package is not a Muster
dependency (not even a transitive one of the ``kubernetes`` client). ECDSA P-256 keys are used
throughout: generating one takes milliseconds, and kube-apiserver 1.20 accepts them both for
serving and for signing service-account tokens (ES256).
"""

from __future__ import annotations

import csv
import secrets
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

__all__ = ["KubeUser", "Pki", "make_pki", "new_user", "write_kubeconfig", "write_token_file"]

# The certificates only have to outlive one test session.
_CERT_DAYS = "7"


@dataclass(frozen=True)
class KubeUser:
    """A user of the static token file: kube-apiserver maps ``token`` to ``name`` and ``groups``."""

    name: str
    token: str
    groups: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class Pki:
    """Paths of the generated certificates and keys."""

    ca_cert: Path
    ca_key: Path
    serving_cert: Path
    serving_key: Path
    service_account_key: Path
    service_account_public_key: Path


def new_user(name: str, groups: Iterable[str] = ()) -> KubeUser:
    """A user with a fresh random token."""
    return KubeUser(name=name, token=secrets.token_hex(16), groups=tuple(groups))


def make_pki(directory: Path, ip_addresses: Sequence[str], dns_names: Sequence[str]) -> Pki:
    """Create a CA, a serving certificate for the given names signed by it, and a signing key."""
    directory.mkdir(parents=True, exist_ok=True)
    pki = Pki(
        ca_cert=directory / "ca.crt",
        ca_key=directory / "ca.key",
        serving_cert=directory / "apiserver.crt",
        serving_key=directory / "apiserver.key",
        service_account_key=directory / "service-account.key",
        service_account_public_key=directory / "service-account.pub",
    )
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    ca_extensions = [
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
    ]
    _openssl(
        [
            *("req", "-x509", *ec, "-subj", "/CN=muster-test-ca", *ca_extensions),
            *("-keyout", pki.ca_key, "-out", pki.ca_cert, "-days", _CERT_DAYS),
        ]
    )
    csr = directory / "apiserver.csr"
    _openssl(["req", "-new", *ec, "-keyout", pki.serving_key, "-out", csr, "-subj", "/CN=kube-apiserver"])
    sans = [f"IP:{ip}" for ip in ip_addresses] + [f"DNS:{name}" for name in dns_names]
    extensions = directory / "apiserver.ext"
    extensions.write_text(
        f"subjectAltName={','.join(sans)}\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth\n"
    )
    _openssl(
        [
            *("x509", "-req", "-in", csr, "-CA", pki.ca_cert, "-CAkey", pki.ca_key, "-CAcreateserial"),
            *("-out", pki.serving_cert, "-days", _CERT_DAYS, "-extfile", extensions),
        ]
    )
    # kube-apiserver's key parsers want the traditional "EC PRIVATE KEY" form here (not PKCS#8)
    # and, for verifying, a separate public key.
    _openssl(["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", pki.service_account_key])
    _openssl(["ec", "-in", pki.service_account_key, "-pubout", "-out", pki.service_account_public_key])
    for key in (pki.ca_key, pki.serving_key, pki.service_account_key):
        key.chmod(0o600)
    return pki


def write_token_file(path: Path, users: Iterable[KubeUser]) -> Path:
    """Write kube-apiserver's ``--token-auth-file``: ``token,user,uid[,"group1,group2"]`` lines."""
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        for user in users:
            row = [user.token, user.name, user.name]
            if user.groups:
                row.append(",".join(user.groups))
            writer.writerow(row)
    path.chmod(0o600)
    return path


def write_kubeconfig(path: Path, server: str, ca_cert: Path, user: KubeUser) -> Path:
    """Write a kubeconfig that reaches ``server`` as ``user`` (bearer token, CA-verified TLS)."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "muster-test", "cluster": {"server": server, "certificate-authority": str(ca_cert)}}
        ],
        "users": [{"name": user.name, "user": {"token": user.token}}],
        "contexts": [{"name": user.name, "context": {"cluster": "muster-test", "user": user.name}}],
        "current-context": user.name,
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path


def _openssl(args: Sequence[str | Path]) -> None:
    result = subprocess.run(["openssl", *map(str, args)], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"openssl {args[0]} failed ({result.returncode}): {result.stderr.strip()}")
