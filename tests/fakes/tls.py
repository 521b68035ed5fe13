"""A throwaway certificate authority for the tests' TLS servers, made with ``cryptography``: a CA
certificate and a server certificate it signs for 127.0.0.1, ::1 and localhost, written as PEM
files. A second, unrelated CA stands for "a certificate nobody told Bruce to trust"."""

from __future__ import annotations

import ipaddress
import ssl
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["TestCA", "make_ca", "ca_file_case"]

_HOSTS = ("127.0.0.1", "::1", "localhost")


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


@dataclass(frozen=True)
class TestCA:
    """``ca_file``: the CA certificate a client trusts; ``cert_file``/``key_file``: the server's."""

    __test__ = False  # not a test class, whatever its name

    ca_file: Path
    cert_file: Path
    key_file: Path

    def server_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.cert_file, self.key_file)
        return context

    def client_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_file))


def make_ca(folder: Path, name: str = "Bruce Test CA", hosts: tuple[str, ...] = _HOSTS) -> TestCA:
    """A new CA and a server certificate for ``hosts`` (127.0.0.1, ::1 and localhost), in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    now = datetime.now(UTC) - timedelta(minutes=5)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder().subject_name(_name(name)).issuer_name(_name(name))
        .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now).not_valid_after(now + timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False, data_encipherment=False,
                                     key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    cert = (
        x509.CertificateBuilder().subject_name(_name(hosts[0])).issuer_name(ca_cert.subject)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now).not_valid_after(now + timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    found = TestCA(folder / "ca.pem", folder / "server.pem", folder / "server.key")
    found.ca_file.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    found.cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    found.key_file.write_bytes(_pem(key))
    found.key_file.chmod(0o600)
    return found


def ca_file_case(case: str, folder: Path, ca: TestCA) -> str:
    """A CA-file setting for a refusal test: ``NOT-PEM`` (a text file that holds no certificate),
    ``CA`` (the test CA's own file, valid), or ``case`` itself (a path as written)."""
    if case == "NOT-PEM":
        (folder / "notes.txt").write_text("not a certificate\n")
        return str(folder / "notes.txt")
    return str(ca.ca_file) if case == "CA" else case
